package outstream

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestReadDamagedWritesNothing: an output of several chunks whose first
// chunk's payload is damaged (its header whole) is refused before a byte
// of it is written, not after the chunks before the damage.
func TestReadDamagedWritesNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tag := Tag{Job: 1, Attempt: 1}
	o := w.Output(tag, 0)
	o.Write(bytes.Repeat([]byte("x"), 3*ChunkSize+10))
	ext, err := o.Close()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var whole bytes.Buffer
	if _, err := Read(&whole, f, tag, ext); err != nil || whole.Len() != 3*ChunkSize+10 {
		t.Fatalf("whole output: %d bytes, %v", whole.Len(), err)
	}
	// A byte of the first chunk's payload, and of the second's.
	for _, off := range []int64{int64(len(Magic)) + HeaderSize + 100, int64(len(Magic)) + 2*HeaderSize + ChunkSize + 5} {
		var b [1]byte
		f.ReadAt(b[:], off)
		f.WriteAt([]byte{b[0] ^ 0xff}, off)
		var got bytes.Buffer
		n, err := Read(&got, f, tag, ext)
		if !errors.Is(err, ErrTorn) || n != 0 || got.Len() != 0 {
			t.Errorf("damage at %d: wrote %d bytes (%d), %v; want nothing and ErrTorn", off, got.Len(), n, err)
		}
		f.WriteAt(b[:], off)
	}
}

// TestReadShortAllocatesLittle: reading a short output allocates about
// its size, not a whole MaxChunk buffer (mqstat --cat of thousands of
// jobs reads one each), and a chunk longer than the output it belongs
// to is torn, not read past the buffer.
func TestReadShortAllocatesLittle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tag := Tag{Job: 1, Attempt: 1}
	o := w.Output(tag, 0)
	o.Write([]byte("line\n"))
	ext, err := o.Close()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const reads = 100
	for range reads {
		if _, err := Read(io.Discard, f, tag, ext); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / reads; per > 4096 {
		t.Errorf("reading a 5-byte output allocates %d bytes", per)
	}
	short := ext
	short.Bytes = 2
	var got bytes.Buffer
	if _, err := Read(&got, f, tag, short); !errors.Is(err, ErrTorn) || got.Len() != 0 {
		t.Errorf("a chunk longer than its output: wrote %q, %v; want nothing and ErrTorn", got.String(), err)
	}
}
