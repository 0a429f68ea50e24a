package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"testing"
)

func TestPlaces(t *testing.T) {
	ctx := context.Background()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			dir := t.TempDir()
			pl := k.make(t, dir)
			tmp, err := pl.Create(ctx, "/x/y/z")
			must(t, err)
			io.WriteString(tmp, "hello")
			if _, err := pl.Stat(ctx, "/x/y/z"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("before Commit: Stat = %v; want not exist", err)
			}
			must(t, tmp.Commit(ctx))
			must(t, tmp.Abort()) // a no-op after Commit
			info, err := pl.Stat(ctx, "/x/y/z")
			if err != nil || info.Size != 5 || !info.Regular || info.ModTime.IsZero() {
				t.Errorf("Stat = %+v, %v", info, err)
			}
			r, info, err := pl.Open(ctx, "/x/y/z")
			must(t, err)
			b, _ := io.ReadAll(r)
			r.Close()
			if string(b) != "hello" || info.Size != 5 {
				t.Errorf("Open: %q, %+v", b, info)
			}

			tmp, err = pl.Create(ctx, "/x/y/z")
			must(t, err)
			io.WriteString(tmp, "partial")
			must(t, tmp.Abort())
			noLeftovers(t, dir)
			if b, _ := os.ReadFile(dir + "/x/y/z"); string(b) != "hello" {
				t.Errorf("after Abort: %q; want the old content", b)
			}

			if _, _, err := pl.Open(ctx, "/x/y"); err == nil {
				t.Error("Open of a directory succeeded")
			}
			if _, err := pl.Create(ctx, "/x/y/z/w"); err == nil {
				t.Error("Create below a file succeeded")
			}
			must(t, pl.Remove(ctx, "/x/y/z"))
			if _, err := pl.Stat(ctx, "/x/y/z"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("after Remove: Stat = %v; want not exist", err)
			}
			if _, _, err := pl.Open(ctx, "/nowhere/f"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Open of a missing file: %v; want not exist", err)
			}
		})
	}
}

// lying reports a size other than what its file holds, as a file that
// changes while it is read does.
type lying struct {
	Place
	delta int64
}

func (l lying) Open(ctx context.Context, p string) (io.ReadCloser, Info, error) {
	r, info, err := l.Place.Open(ctx, p)
	info.Size += l.delta
	return r, info, err
}

func TestMoveSourceChanged(t *testing.T) {
	for _, delta := range []int64{-1, 1} {
		p := newPair(t, kinds[0], kinds[1])
		writeFile(t, p.A+"/f", randomBytes(100<<10, 2))
		p.ps["a"] = lying{p.ps["a"], delta}
		res := p.m.Move(context.Background(), Transfer{Path: "/f", From: "a", To: "b", Size: -1})
		if !errors.Is(res.Err, ErrMismatch) {
			t.Errorf("delta %d: %v; want ErrMismatch", delta, res.Err)
		}
		noLeftovers(t, p.B, p.B+"/f")
		if _, _, err := HashFile(context.Background(), p.ps["a"], "/f"); !errors.Is(err, ErrMismatch) {
			t.Errorf("HashFile, delta %d: %v; want ErrMismatch", delta, err)
		}
	}
}

// TestPlacesSweepLeftovers: what a killed writer left (a temporary file
// of the target, partly written) is taken over by its next Create of the
// same file and never appears under the final name; two writers over one
// directory (two sites on one account and data root) never take over each
// other's temporary files.
func TestPlacesSweepLeftovers(t *testing.T) {
	ctx := context.Background()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			dir := t.TempDir()
			pl := k.make(t, dir)
			must(t, os.MkdirAll(dir+"/x", 0o755))
			left := dir + "/x/.z" + TempSuffix
			must(t, os.WriteFile(left, []byte("half of a tra"), 0o644))

			tmp, err := pl.Create(ctx, "/x/z")
			must(t, err)
			io.WriteString(tmp, "whole")
			must(t, tmp.Commit(ctx))
			if b, err := os.ReadFile(dir + "/x/z"); err != nil || string(b) != "whole" {
				t.Errorf("after Commit: %q, %v; want whole", b, err)
			}
			noLeftovers(t, dir)

			a, b := withWriter(pl, "a"), withWriter(pl, "b")
			ta, err := a.Create(ctx, "/x/z")
			must(t, err)
			tb, err := b.Create(ctx, "/x/z")
			must(t, err)
			io.WriteString(ta, "from a")
			io.WriteString(tb, "from b, longer")
			must(t, ta.Commit(ctx))
			if got, _ := os.ReadFile(dir + "/x/z"); string(got) != "from a" {
				t.Errorf("a committed %q; want from a", got)
			}
			must(t, tb.Commit(ctx))
			if got, _ := os.ReadFile(dir + "/x/z"); string(got) != "from b, longer" {
				t.Errorf("b committed %q; want from b, longer", got)
			}
			noLeftovers(t, dir)
		})
	}
}

// withWriter is pl writing as w.
func withWriter(pl Place, w string) Place {
	switch p := pl.(type) {
	case Dir:
		p.Writer = w
		return p
	case SFTP:
		p.Writer = w
		return p
	}
	panic(fmt.Sprintf("no writer for %T", pl))
}

// TestSFTPSweep: Sweep removes the temporary files its writer left
// anywhere below the data root, and nothing else: not another writer's,
// not final files, not what lies outside the root.
func TestSFTPSweep(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := dir + "/root"
	pl := SFTP{Client: sftpClient(t), Root: root, Writer: "siteB"}
	ours := root + "/a/b/" + tempName("f", "siteB")
	theirs := root + "/a/.g" + tempName("", "siteC")[1:]
	keep := []string{root + "/a/f", theirs, dir + "/.x" + tempName("", "siteB")[1:], root + "/a/.h.mq-part-siteB"}
	for _, p := range append([]string{ours}, keep...) {
		writeFile(t, p, []byte("x"))
	}
	n, err := pl.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1 removed", n, err)
	}
	if _, err := os.Stat(ours); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", ours, err)
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if n, err := (SFTP{Client: sftpClient(t), Root: dir + "/none", Writer: "siteB"}).Sweep(ctx); err != nil || n != 0 {
		t.Errorf("Sweep of a missing root = %d, %v", n, err)
	}
}
