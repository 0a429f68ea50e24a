package argfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpen: with regularOnly, only a regular file (or a link to one)
// opens; a FIFO nobody writes is refused at once, not waited on. Without
// it, whatever the name is opens, a pipe included.
func TestOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "jobs")
	if err := os.WriteFile(file, []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.WriteString("piped\n")
	w.Close()
	pipe := "/dev/fd/" + strconv.Itoa(int(r.Fd()))
	for _, tc := range []struct {
		path        string
		regularOnly bool
		want        string // what is read; "" when refused
		err         error
	}{
		{file, true, "data\n", nil},
		{filepath.Join(dir, "link"), true, "data\n", nil},
		{fifo, true, "", ErrNotRegular},
		{dir, true, "", ErrNotRegular},
		{"/dev/zero", true, "", ErrNotRegular},
		{"/dev/null", true, "", ErrNotRegular},
		{pipe, true, "", ErrNotRegular},
		{filepath.Join(dir, "nosuch"), true, "", os.ErrNotExist},
		{file, false, "data\n", nil},
		{pipe, false, "piped\n", nil},
		{"/dev/null", false, "", nil},
	} {
		done := make(chan struct{})
		var f *os.File
		var err error
		go func() { f, err = Open(tc.path, tc.regularOnly); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("Open(%s, %v) still waits after 30s", tc.path, tc.regularOnly)
		}
		if tc.err != nil {
			var pe *os.PathError
			if !errors.Is(err, tc.err) || !errors.As(err, &pe) {
				t.Errorf("Open(%s, %v): %v, want a *PathError of %v", tc.path, tc.regularOnly, err, tc.err)
			}
			if f != nil {
				f.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%s, %v): %v", tc.path, tc.regularOnly, err)
			continue
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil || string(b) != tc.want {
			t.Errorf("Open(%s, %v) read %q (%v), want %q", tc.path, tc.regularOnly, b, err, tc.want)
		}
	}
}

// countingReader is an endless stream that counts what is read of it.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// TestReadAll: up to the limit is read whole; beyond it is ErrTooLarge,
// with at most limit+1 bytes read, even of an endless stream.
func TestReadAll(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		limit int64
		err   error
	}{
		{"", 4, nil},
		{"abcd", 4, nil},
		{"abcde", 4, ErrTooLarge},
	} {
		b, err := ReadAll(strings.NewReader(tc.in), tc.limit)
		if !errors.Is(err, tc.err) || err == nil && string(b) != tc.in {
			t.Errorf("ReadAll(%q, %d): %q, %v; want %v", tc.in, tc.limit, b, err, tc.err)
		}
	}
	var c countingReader
	if _, err := ReadAll(&c, 1000); !errors.Is(err, ErrTooLarge) || c.n > 1001 {
		t.Errorf("an endless stream: %v after %d bytes read, want ErrTooLarge after at most 1001", err, c.n)
	}
}

// TestPath: a relative name is taken from the command's directory, an
// absolute one only cleaned (the directory is not asked for).
func TestPath(t *testing.T) {
	t.Parallel()
	getwd := func() (string, error) { return "/home/u", nil }
	for _, tc := range []struct{ name, want string }{
		{"jobs.jsonl", "/home/u/jobs.jsonl"},
		{"a/../b/", "/home/u/b"},
		{".", "/home/u"},
		{"/x//y/./z", "/x/y/z"},
	} {
		if got, err := Path(tc.name, getwd); err != nil || got != tc.want {
			t.Errorf("Path(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	gone := errors.New("the current directory is gone")
	if _, err := Path("rel", func() (string, error) { return "", gone }); !errors.Is(err, gone) {
		t.Errorf("Path with no directory: %v, want its error", err)
	}
	if got, err := Path("/abs", func() (string, error) { return "", gone }); err != nil || got != "/abs" {
		t.Errorf("Path(/abs) with no directory: %q, %v", got, err)
	}
}
