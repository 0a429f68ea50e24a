package outlink

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests set the package's seams (opened, reader): none runs in
// parallel.

// linked makes a data root whose job directory /w holds run/r.dat
// (data) and out.dat, a link to it: the output to resolve. It returns
// the root and the job.
func linked(t *testing.T, data []byte) (root string, job Job) {
	t.Helper()
	root = t.TempDir()
	work := filepath.Join(root, "w")
	if err := os.MkdirAll(filepath.Join(work, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "run", "r.dat"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("run/r.dat", filepath.Join(work, "out.dat")); err != nil {
		t.Fatal(err)
	}
	return root, func() (string, string) { return work, "" }
}

// seams sets the package's seams for the test.
func seams(t *testing.T, open func(*os.File), read func(*os.File) io.Reader) {
	t.Cleanup(func() { opened, reader = func(*os.File) {}, func(f *os.File) io.Reader { return f } })
	opened, reader = open, read
}

// resolveWithin is Resolve of /w/out.dat, failing the test if it has not
// returned in a minute.
func resolveWithin(t *testing.T, root string, job Job, wait time.Duration) string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		done <- Resolve(context.Background(), root, "/w/out.dat", job, wait, "output: ", "site s (host h)")
	}()
	select {
	case why := <-done:
		return why
	case <-time.After(time.Minute):
		t.Fatal("resolving the link did not return in a minute: a call on a hung filesystem held it")
		return ""
	}
}

func isLink(t *testing.T, p string) bool {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()&os.ModeSymlink != 0
}

// The linked file is on a filesystem whose server is gone: its open, or
// a read of it, does not return. The resolve gives up after its
// deadline, the output said unresolved, the link left as it was; when
// the call returns at last, the file is closed and no copy is left. It
// held the job's report, and its slot, for ever.
func TestResolveHung(t *testing.T) {
	for _, in := range []string{"open", "read"} {
		t.Run(in, func(t *testing.T) {
			root, job := linked(t, []byte("result\n"))
			hang := make(chan struct{})
			files := make(chan *os.File, 1)
			seams(t, func(f *os.File) {
				files <- f
				if in == "open" {
					<-hang
				}
			}, func(f *os.File) io.Reader {
				if in == "read" {
					return readerFunc(func(b []byte) (int, error) { <-hang; return f.Read(b) })
				}
				return f
			})
			released := false
			t.Cleanup(func() {
				if !released {
					close(hang)
				}
			})
			why := resolveWithin(t, root, job, 300*time.Millisecond)
			want := "output: /w/out.dat at site s (host h): a filesystem call resolving the link did not return in 300ms"
			if !strings.HasPrefix(why, want) {
				t.Fatalf("why %q; want %q", why, want)
			}
			out := filepath.Join(root, "w", "out.dat")
			if !isLink(t, out) {
				t.Error("the output is no longer a link")
			}
			close(hang)
			released = true
			f := <-files
			deadline := time.Now().Add(time.Minute)
			for _, err := f.Stat(); !errors.Is(err, os.ErrClosed); _, err = f.Stat() {
				if time.Now().After(deadline) {
					t.Fatal("the linked file was left open once its call returned")
				}
				time.Sleep(time.Millisecond)
			}
			// Closed last: the resolve given up on has ended.
			if !isLink(t, out) {
				t.Error("the resolve given up on replaced the link once its call returned")
			}
			if _, err := os.Lstat(filepath.Join(root, "w", ".out.dat.mq-link")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the copy was left beside the link: %v", err)
			}
		})
	}
}

// The linked file is big, on a slow filesystem: its copy takes longer
// than the deadline (twice), each read well within it. The copy is not
// cut: the output is a copy of the file.
func TestResolveSlow(t *testing.T) {
	const wait = 2 * time.Second // a stall of the test itself this long would cut it
	data := []byte(strings.Repeat("0123456789abcdef", 4096))
	root, job := linked(t, data)
	seams(t, func(*os.File) {}, func(f *os.File) io.Reader {
		end := time.Now().Add(2 * wait)
		return readerFunc(func(b []byte) (int, error) {
			if time.Now().Before(end) {
				time.Sleep(5 * time.Millisecond) // one more slow read
				b = b[:min(len(b), 1)]
			}
			return f.Read(b)
		})
	})
	start := time.Now()
	if why := resolveWithin(t, root, job, wait); why != "" {
		t.Fatalf("why %q; want the link resolved", why)
	}
	if took := time.Since(start); took < 2*wait {
		t.Fatalf("the copy took %v; want the test's slow reads to last %v", took, 2*wait)
	}
	out := filepath.Join(root, "w", "out.dat")
	if isLink(t, out) {
		t.Fatal("the output is still a link")
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != string(data) {
		t.Errorf("the output holds %d bytes (%v); want the %d of the file it linked to", len(b), err, len(data))
	}
}

type readerFunc func([]byte) (int, error)

func (r readerFunc) Read(b []byte) (int, error) { return r(b) }
