package stage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// pair is a Mover between place "a" (files under A) and "b" (under B).
type pair struct {
	A, B string
	ps   places
	m    *Mover
}

func newPair(t testing.TB, from, to kind) *pair {
	p := &pair{A: t.TempDir(), B: t.TempDir()}
	p.ps = places{"a": from.make(t, p.A), "b": to.make(t, p.B)}
	p.m = &Mover{Places: p.ps.get}
	return p
}

// eachPair runs f for every kind of source and target.
func eachPair(t *testing.T, f func(t *testing.T, p *pair)) {
	for _, from := range kinds {
		for _, to := range kinds {
			t.Run(from.name+"-"+to.name, func(t *testing.T) { f(t, newPair(t, from, to)) })
		}
	}
}

func TestMove(t *testing.T) {
	eachPair(t, func(t *testing.T, p *pair) {
		ctx := context.Background()
		for i, size := range []int{0, 1, 10 << 10, 300<<10 + 7, 3<<20 + 1} {
			data := randomBytes(size, uint64(i))
			name := "/proj/seqs/p" + string(rune('0'+i)) + ".fa"
			writeFile(t, p.A+name, data)
			want := sum(data)
			for _, tr := range []Transfer{
				{Path: name, From: "a", To: "b", Size: int64(size), SHA256: want},
				{Path: name, From: "a", To: "b", Size: -1}, // unknown: computed, replaces
			} {
				res := p.m.Move(ctx, tr)
				if res.Err != nil {
					t.Fatalf("Move(%+v): %v", tr, res.Err)
				}
				if res.Bytes != int64(size) || res.SHA256 != want {
					t.Errorf("Move(%+v) = %d bytes, %s; want %d, %s", tr, res.Bytes, res.SHA256, size, want)
				}
				got, err := os.ReadFile(p.B + name)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("target of %s: %d bytes, %v; want the %d moved", name, len(got), err, size)
				}
			}
			for _, pl := range []string{"a", "b"} {
				sha, n, err := HashFile(ctx, p.ps[pl], name)
				if err != nil || sha != want || n != int64(size) {
					t.Errorf("HashFile at %s: %s, %d, %v; want %s, %d", pl, sha, n, err, want, size)
				}
			}
		}
		noLeftovers(t, p.B)
	})
}

func TestMoveMismatch(t *testing.T) {
	eachPair(t, func(t *testing.T, p *pair) {
		data := randomBytes(200<<10, 9)
		writeFile(t, p.A+"/d/f", data)
		wrong := sum([]byte("something else"))
		for _, tr := range []Transfer{
			{Path: "/d/f", From: "a", To: "b", Size: -1, SHA256: wrong},
			{Path: "/d/f", From: "a", To: "b", Size: 5, SHA256: sum(data)},
			{Path: "/d/f", From: "a", To: "b", Size: int64(len(data)) + 1},
		} {
			res := p.m.Move(context.Background(), tr)
			if !errors.Is(res.Err, ErrMismatch) {
				t.Errorf("Move(%+v) = %v; want ErrMismatch", tr, res.Err)
			}
			for _, s := range []string{"/d/f", "from a", "to b"} {
				if res.Err != nil && !strings.Contains(res.Err.Error(), s) {
					t.Errorf("error %q does not name %q", res.Err, s)
				}
			}
			noLeftovers(t, p.B, p.B+"/d/f")
		}
	})
}

// TestMoveCancel cancels a move in the middle of its copy: the target and
// its temporary file are gone.
func TestMoveCancel(t *testing.T) {
	eachPair(t, func(t *testing.T, p *pair) {
		data := randomBytes(4<<20, 3)
		writeFile(t, p.A+"/big", data)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var read int
		p.ps["a"] = &hook{Place: p.ps["a"], onOpen: func(r io.ReadCloser) io.ReadCloser {
			return readFunc{func(b []byte) (int, error) {
				n, err := r.Read(b)
				if read += n; read > 1<<20 {
					cancel()
				}
				return n, err
			}, r.Close}
		}}
		res := p.m.Move(ctx, Transfer{Path: "/big", From: "a", To: "b", Size: -1})
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("Move = %+v; want canceled", res)
		}
		if read >= len(data) {
			t.Errorf("read all %d bytes before stopping", read)
		}
		noLeftovers(t, p.B, p.B+"/big")
	})
}

// tempHook wraps a Place so that its Temps are plain writers calling
// onWrite first.
type tempHook struct {
	Place
	onWrite func()
}

func (h tempHook) Create(ctx context.Context, p string) (Temp, error) {
	t, err := h.Place.Create(ctx, p)
	if err != nil {
		return nil, err
	}
	return hookedTemp{t, h.onWrite}, nil
}

type hookedTemp struct {
	t       Temp
	onWrite func()
}

func (h hookedTemp) Write(b []byte) (int, error)      { h.onWrite(); return h.t.Write(b) }
func (h hookedTemp) Commit(ctx context.Context) error { return h.t.Commit(ctx) }
func (h hookedTemp) Abort() error                     { return h.t.Abort() }

// TestMoveCancelWriting cancels while the source pipelines its reads
// (an SFTP source's WriteTo), seen from the writing side.
func TestMoveCancelWriting(t *testing.T) {
	eachPair(t, func(t *testing.T, p *pair) {
		writeFile(t, p.A+"/big", randomBytes(4<<20, 4))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		writes := 0
		p.ps["b"] = tempHook{p.ps["b"], func() {
			if writes++; writes == 3 {
				cancel()
			}
		}}
		res := p.m.Move(ctx, Transfer{Path: "/big", From: "a", To: "b", Size: -1})
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("Move = %+v; want canceled", res)
		}
		noLeftovers(t, p.B, p.B+"/big")
	})
}

// TestMoveShared: concurrent moves of a file to one place make one
// transfer, and every caller gets its result.
func TestMoveShared(t *testing.T) {
	eachPair(t, func(t *testing.T, p *pair) {
		data := randomBytes(1<<20, 5)
		writeFile(t, p.A+"/shared", data)
		gate := make(chan struct{})
		h := &hook{Place: p.ps["a"], opens: make(chan string, 100), onOpen: func(r io.ReadCloser) io.ReadCloser {
			first := true
			return readFunc{func(b []byte) (int, error) {
				if first {
					<-gate
					first = false
				}
				return r.Read(b)
			}, r.Close}
		}}
		p.ps["a"] = h
		tr := Transfer{Path: "/shared", From: "a", To: "b", Size: -1}
		const n = 6
		results := make([]Result, n)
		var wg sync.WaitGroup
		wg.Go(func() { results[0] = p.m.Move(context.Background(), tr) })
		<-h.opens
		for i := 1; i < n; i++ {
			wg.Go(func() { results[i] = p.m.Move(context.Background(), tr) })
		}
		waitFor(t, func() bool {
			p.m.mu.Lock()
			defer p.m.mu.Unlock()
			f := p.m.flights[flightKey{"/shared", "b"}]
			return f != nil && f.ctx.waiters() == n
		})
		close(gate)
		wg.Wait()
		for i, r := range results {
			if r.Err != nil || r.SHA256 != sum(data) || r.Bytes != int64(len(data)) {
				t.Errorf("caller %d: %+v", i, r)
			}
		}
		if len(h.opens) != 0 {
			t.Errorf("%d more opens of the source; want the one transfer shared", len(h.opens))
		}
		// Once it is over, a move is a transfer of its own.
		if res := p.m.Move(context.Background(), tr); res.Err != nil || len(h.opens) != 1 {
			t.Errorf("a later move: %v, %d opens; want one", res.Err, len(h.opens))
		}
	})
}

// TestMoveSharedCancel: one caller giving up does not stop the transfer
// others wait for; the last one giving up does.
func TestMoveSharedCancel(t *testing.T) {
	p := newPair(t, kinds[0], kinds[0])
	writeFile(t, p.A+"/f", randomBytes(100, 1))
	gate := make(chan struct{})
	h := &hook{Place: p.ps["a"], opens: make(chan string, 10), onOpen: func(r io.ReadCloser) io.ReadCloser {
		return readFunc{func(b []byte) (int, error) { <-gate; return r.Read(b) }, r.Close}
	}}
	p.ps["a"] = h
	tr := Transfer{Path: "/f", From: "a", To: "b", Size: -1}
	ctx1, cancel1 := context.WithCancel(context.Background())
	r1 := make(chan Result, 1)
	r2 := make(chan Result, 1)
	go func() { r1 <- p.m.Move(ctx1, tr) }()
	<-h.opens
	go func() { r2 <- p.m.Move(context.Background(), tr) }()
	waitFor(t, func() bool {
		p.m.mu.Lock()
		defer p.m.mu.Unlock()
		return p.m.flights[flightKey{"/f", "b"}].ctx.waiters() == 2
	})
	cancel1()
	if res := <-r1; !errors.Is(res.Err, context.Canceled) {
		t.Errorf("first caller: %+v; want canceled", res)
	}
	close(gate)
	if res := <-r2; res.Err != nil {
		t.Errorf("second caller: %v", res.Err)
	}
	if _, err := os.Stat(p.B + "/f"); err != nil {
		t.Error(err)
	}
}

func (c *flightCtx) waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ctxs)
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30 s")
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// TestMoveSymlinkEscape: no symbolic link leads a move out of a data root,
// at the source or the target.
func TestMoveSymlinkEscape(t *testing.T) {
	eachPair(t, func(t *testing.T, p *pair) {
		outside := t.TempDir()
		writeFile(t, outside+"/secret", []byte("secret"))
		must(t, os.Symlink(outside, p.A+"/esc"))
		must(t, os.Symlink(outside+"/secret", p.A+"/direct"))
		must(t, os.Symlink("../../"+filepath.Base(outside), p.A+"/rel"))
		writeFile(t, p.A+"/out/x", []byte("x"))
		must(t, os.Symlink(outside, p.B+"/out"))
		for _, name := range []string{"/esc/secret", "/direct", "/rel/secret", "/out/x"} {
			res := p.m.Move(context.Background(), Transfer{Path: name, From: "a", To: "b", Size: -1})
			if !errors.Is(res.Err, ErrPath) {
				t.Errorf("Move %s = %+v; want ErrPath", name, res)
			}
		}
		noLeftovers(t, outside, outside+"/x")
		noLeftovers(t, p.B)
		for _, pl := range []string{"a", "b"} {
			if err := p.ps[pl].Remove(context.Background(), "/esc/secret"); err == nil {
				t.Errorf("Remove through a link at %s succeeded", pl)
			}
			if _, err := p.ps[pl].Stat(context.Background(), "/direct"); !errors.Is(err, ErrPath) && pl == "a" {
				t.Errorf("Stat of a link out at %s: %v; want ErrPath", pl, err)
			}
		}
		if _, err := os.Stat(outside + "/secret"); err != nil {
			t.Error(err)
		}
	})
}

func TestMoveDotDot(t *testing.T) {
	eachPair(t, func(t *testing.T, p *pair) {
		writeFile(t, p.A+"/f", []byte("f"))
		for _, name := range []string{"/a/../../f", "/../f", "f", "", "/x/..", "/f\x00"} {
			res := p.m.Move(context.Background(), Transfer{Path: name, From: "a", To: "b", Size: -1})
			if !errors.Is(res.Err, ErrPath) {
				t.Errorf("Move %q = %+v; want ErrPath", name, res)
			}
		}
		noLeftovers(t, p.B)
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestMoveBounded moves a 64 MiB file made on the fly: the Mover must
// allocate far less than the file (a whole-file buffer would show).
func TestMoveBounded(t *testing.T) {
	const size = 64 << 20
	dst := t.TempDir()
	m := &Mover{Places: places{"gen": generated{Size: size}, "d": Dir{Root: dst}}.get}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := m.Move(context.Background(), Transfer{Path: "/big", From: "gen", To: "d", Size: size})
	runtime.ReadMemStats(&after)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("moving %d bytes allocated %d", size, alloc)
	if alloc > 8<<20 {
		t.Errorf("moving %d bytes allocated %d", size, alloc)
	}
	if want := patternSum(size); res.SHA256 != want {
		t.Errorf("sha %s, want %s", res.SHA256, want)
	}
	if fi, err := os.Stat(dst + "/big"); err != nil || fi.Size() != size {
		t.Errorf("target: %v, %v", fi, err)
	}
}

// TestMoveNewRoot: a data root that does not exist yet is made.
func TestMoveNewRoot(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()+"/not/yet"
			writeFile(t, src+"/a/b", []byte("data"))
			m := &Mover{Places: places{"a": Dir{Root: src}, "b": k.make(t, dst)}.get}
			if res := m.Move(context.Background(), Transfer{Path: "/a/b", From: "a", To: "b", Size: 4}); res.Err != nil {
				t.Fatal(res.Err)
			}
			if got, err := os.ReadFile(dst + "/a/b"); string(got) != "data" {
				t.Errorf("target: %q, %v", got, err)
			}
			if res := m.Move(context.Background(), Transfer{Path: "/a/b", From: "a", To: "a", Size: -1}); res.Err == nil {
				t.Error("a move from a place to itself succeeded")
			}
		})
	}
}

func TestMoveAll(t *testing.T) {
	p := newPair(t, kinds[0], kinds[1])
	var ts []Transfer
	for i := range 50 {
		name := "/many/f" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		data := randomBytes(1000+i, uint64(i))
		writeFile(t, p.A+name, data)
		ts = append(ts, Transfer{Path: name, From: "a", To: "b", Size: int64(len(data)), SHA256: sum(data)})
	}
	ts = append(ts, Transfer{Path: "/many/missing", From: "a", To: "b", Size: -1})
	rates := &Rates{}
	p.m.Rates = rates
	p.m.Local = "a"
	res := p.m.MoveAll(context.Background(), ts, 8)
	for i, r := range res[:50] {
		if r.Err != nil || r.SHA256 != ts[i].SHA256 {
			t.Errorf("%s: %+v", ts[i].Path, r)
		}
	}
	if !errors.Is(res[50].Err, os.ErrNotExist) {
		t.Errorf("missing file: %v; want not exist", res[50].Err)
	}
	if _, _, ok := rates.Link("b"); !ok {
		t.Error("no rate measured for b")
	}
	if _, _, ok := rates.Link("a"); ok {
		t.Error("the Local place's link measured")
	}
}
