package outstream

import (
	"os"
	"testing"
	"time"
)

// TestSyncHoldsNoWrite: a sync that does not return (a hung filesystem)
// holds neither the file's size, nor its error, nor other outputs'
// chunks: the agent reads the size to report, and other jobs write on.
func TestSyncHoldsNoWrite(t *testing.T) {
	w, path := newStream(t)
	block, entered := make(chan struct{}), make(chan struct{})
	fsync = func(*os.File) error {
		close(entered)
		<-block
		return nil
	}
	defer func() { fsync = (*os.File).Sync }()
	defer close(block)
	go w.Sync()
	<-entered
	done := make(chan Extent)
	go func() {
		before := w.Size()
		w.Err()
		o := w.Output(Tag{Job: 1, Attempt: 1, Stream: Stdout}, 0)
		o.Write([]byte("hello\n"))
		ext, err := o.Close()
		if err != nil {
			t.Error(err)
		}
		if w.Size() <= before {
			t.Errorf("size %d after a chunk, was %d", w.Size(), before)
		}
		done <- ext
	}()
	select {
	case ext := <-done:
		if got, err := readBack(t, path, Tag{Job: 1, Attempt: 1, Stream: Stdout}, ext); err != nil || got != "hello\n" {
			t.Fatalf("read back %q, %v", got, err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Size, Err or a chunk's write waited for a sync that does not return")
	}
}
