package stage

import (
	"context"
	"errors"
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
