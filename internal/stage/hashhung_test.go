package stage

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// hungPlace is a directory whose files' reads never return, as on a
// filesystem whose server is gone: neither a cut nor ctx ends them.
type hungPlace struct {
	Dir
	block chan struct{}
}

func (h hungPlace) Open(context.Context, string) (io.ReadCloser, Info, error) {
	return io.NopCloser(blockReader(h.block)), Info{Size: 10, Regular: true}, nil
}

type blockReader chan struct{}

func (b blockReader) Read([]byte) (int, error) {
	<-b
	return 0, io.EOF
}

// TestHashHungRead: hashing a file whose read never returns fails as
// stalled once its stall limit passes; it waited on the read for ever
// (an agent's report waits for the hashes of a job's outputs).
func TestHashHungRead(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	defer close(block)
	done := make(chan error, 1)
	go func() {
		_, _, err := hashWithin(context.Background(), hungPlace{block: block}, "/out", 50*time.Millisecond)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStalled) {
			t.Fatalf("hash: %v, want stalled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("hashing a file whose read never returns did not end")
	}
}
