package stage

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// overrun is a source Place whose one file claims size (-1: unknown) and
// sends sent bytes, through Read only or through WriteTo as well.
type overrun struct {
	Place
	size, sent int64
	writerTo   bool
	read       *int64 // if set, counts the bytes read
}

type countReader struct {
	r io.Reader
	n *int64
}

func (c countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	*c.n += int64(n)
	return n, err
}

func (o overrun) Open(ctx context.Context, p string) (io.ReadCloser, Info, error) {
	r := io.LimitReader(&pattern{}, o.sent)
	if o.read != nil {
		r = countReader{r, o.read}
	}
	if o.writerTo {
		return writerTo{r}, Info{Size: o.size, Regular: true}, nil
	}
	return io.NopCloser(r), Info{Size: o.size, Regular: true}, nil
}

// writerTo sends its bytes in chunks of 1 MiB through WriteTo, as an SFTP
// file does.
type writerTo struct{ r io.Reader }

func (w writerTo) Read(b []byte) (int, error) { return w.r.Read(b) }
func (w writerTo) Close() error               { return nil }
func (w writerTo) WriteTo(dst io.Writer) (int64, error) {
	return io.CopyBuffer(dst, w.r, make([]byte, 1<<20))
}

// counted counts the bytes written to the temporary files of a Place.
type counted struct {
	Place
	n *int64
}

func (c counted) Create(ctx context.Context, p string) (Temp, error) {
	t, err := c.Place.Create(ctx, p)
	if err != nil {
		return nil, err
	}
	return countedTemp{t, c.n}, nil
}

type countedTemp struct {
	Temp
	n *int64
}

func (t countedTemp) Write(b []byte) (int, error) {
	n, err := t.Temp.Write(b)
	*t.n += int64(n)
	return n, err
}

// TestMoveRefusesOverrun: a source that announces no size (or a wrong
// one) and sends far more than the catalog's size fails the transfer
// before a byte past that size reaches the target, on every copy path.
func TestMoveRefusesOverrun(t *testing.T) {
	const want = 10
	cases := []struct {
		name       string
		size, sent int64
	}{
		{"size -1, 300 MiB sent", -1, 300 << 20},
		{"size -1, one byte more", -1, want + 1},
		{"size unknown, the catalog's unknown too, its own size kept", -1, 64 << 10},
	}
	for _, k := range kinds {
		for _, wt := range []bool{false, true} {
			for _, c := range cases {
				name := k.name + "/" + c.name
				if wt {
					name += "/writer-to"
				}
				t.Run(name, func(t *testing.T) {
					dir := t.TempDir()
					var n int64
					expect := int64(want)
					if c.name == cases[2].name {
						expect = -1 // nothing bounds it: the transfer goes through
					}
					m := Mover{Places: places{
						"a": overrun{size: c.size, sent: c.sent, writerTo: wt},
						"b": counted{k.make(t, dir), &n},
					}.get}
					res := m.Move(context.Background(), Transfer{Path: "/in", From: "a", To: "b", Size: expect})
					if expect < 0 {
						if res.Err != nil {
							t.Fatal(res.Err)
						}
						return
					}
					if !errors.Is(res.Err, ErrMismatch) {
						t.Fatalf("err = %v, want ErrMismatch", res.Err)
					}
					if n > want {
						t.Errorf("%d bytes written to the target, at most %d expected", n, want)
					}
					if _, err := os.Lstat(filepath.Join(dir, "in")); !os.IsNotExist(err) {
						t.Errorf("the target exists (%v)", err)
					}
					noLeftovers(t, dir)
				})
			}
		}
	}
}

// TestHashFileStopsAtSize: hashing a file that sends more than its size
// stops reading soon after the size, not at the source's end.
func TestHashFileStopsAtSize(t *testing.T) {
	for _, wt := range []bool{false, true} {
		var n int64
		_, _, err := HashFile(context.Background(), overrun{size: 10, sent: 300 << 20, writerTo: wt, read: &n}, "/in")
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("writerTo %v: err = %v, want ErrMismatch", wt, err)
		}
		if n > 2<<20 {
			t.Errorf("writerTo %v: read %d bytes of a file of 10", wt, n)
		}
	}
}
