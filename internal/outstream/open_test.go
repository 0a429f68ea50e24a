package outstream

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Every reader of output opens it with OpenFile: a regular file only,
// never through a link, and never waiting on a FIFO a job left where its
// output was (an open without O_NONBLOCK waits for a writer for ever).
func TestOpenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	regular := filepath.Join(dir, "out")
	if err := os.WriteFile(regular, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       error // nil: opened
	}{
		{"regular file", regular, nil},
		{"missing", filepath.Join(dir, "none"), os.ErrNotExist},
		{"fifo", fifo, ErrNotRegular},
		{"directory", dir, ErrNotRegular},
		{"link", link, syscall.ELOOP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				f, fi, err := OpenFile(tc.path)
				if err == nil {
					if !fi.Mode().IsRegular() {
						err = errors.New("opened a file that is not regular")
					}
					f.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
					t.Fatalf("OpenFile: %v, want %v", err, tc.want)
				}
			case <-time.After(time.Minute):
				t.Fatal("OpenFile still waits after a minute: it waits for a writer")
			}
		})
	}
}
