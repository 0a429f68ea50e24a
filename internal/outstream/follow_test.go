package outstream

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// followFixture writes a stream file with output a's chunks among b's and
// returns its bytes and a's whole output.
func followFixture(t *testing.T) (file []byte, want string, a Tag) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "1-0.mqs")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := Tag{Job: 1, Attempt: 2}, Tag{Job: 3, Attempt: 1, Stream: Stderr}
	oa, ob := w.Output(a, 0), w.Output(b, 0)
	var sb strings.Builder
	for i, s := range []string{"first\n", "second\n", strings.Repeat("x", ChunkSize+100)} {
		oa.Write([]byte(s))
		sb.WriteString(s)
		oa.Flush()
		ob.Write(bytes.Repeat([]byte{'b'}, 10*(i+1)))
		ob.Flush()
	}
	ob.Close()
	oa.Write([]byte("last\n")) // the file's last chunk
	sb.WriteString("last\n")
	if _, err := oa.Close(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	file, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return file, sb.String(), a
}

// TestFollower: polled as the file grows by any step, a Follower gives
// the followed output whole and in order, only its own chunks, and never
// a chunk before it is whole; a chunk whose bytes are not all written yet
// (zeros where the writer has not reached) is not given until they are.
func TestFollower(t *testing.T) {
	t.Parallel()
	file, want, tag := followFixture(t)
	for _, step := range []int{7, HeaderSize, 1000, len(file)} {
		f := NewFollower(tag)
		var got bytes.Buffer
		for size := 0; ; size = min(size+step, len(file)) {
			err := f.Poll(bytes.NewReader(file), int64(size), func(p []byte) error { got.Write(p); return nil })
			if err != nil {
				t.Fatalf("step %d, size %d: %v", step, size, err)
			}
			if !strings.HasPrefix(want, got.String()) {
				t.Fatalf("step %d, size %d: got %q, not a prefix of the output", step, size, got.String())
			}
			if size == len(file) {
				break
			}
		}
		if got.String() != want || !f.Done() || !f.Found() || f.Bytes() != int64(len(want)) {
			t.Errorf("step %d: got %d bytes (done %v, found %v), want %d", step, got.Len(), f.Done(), f.Found(), len(want))
		}
	}

	// The last chunk's payload not written yet, though the size says so.
	partial := append([]byte(nil), file...)
	for i := len(partial) - 3; i < len(partial); i++ {
		partial[i] = 0
	}
	f := NewFollower(tag)
	var got bytes.Buffer
	collect := func(p []byte) error { got.Write(p); return nil }
	if err := f.Poll(bytes.NewReader(partial), int64(len(partial)), collect); err != nil {
		t.Fatal(err)
	}
	if got.String() != strings.TrimSuffix(want, "last\n") || f.Done() {
		t.Errorf("with the last chunk partly written: got %d bytes, done %v; want all but %q", got.Len(), f.Done(), "last\n")
	}
	if err := f.Poll(bytes.NewReader(file), int64(len(file)), collect); err != nil || got.String() != want || !f.Done() {
		t.Errorf("once written: %v, %d bytes, done %v", err, got.Len(), f.Done())
	}

	// Another output only: nothing found.
	f = NewFollower(Tag{Job: 9, Attempt: 1})
	if err := f.Poll(bytes.NewReader(file), int64(len(file)), func([]byte) error { t.Error("a chunk of another output"); return nil }); err != nil || f.Found() {
		t.Errorf("absent output: %v, found %v", err, f.Found())
	}
	if err := NewFollower(tag).Poll(bytes.NewReader([]byte("NOTASTRM")), 8, collect); err == nil {
		t.Error("a file without the header: no error")
	}
	stop := errors.New("stop")
	if err := NewFollower(tag).Poll(bytes.NewReader(file), int64(len(file)), func([]byte) error { return stop }); err != stop {
		t.Errorf("fn's error: %v, want it returned", err)
	}
}
