package cls

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"

	"github.com/mq-hpc/mq/internal/stage"
	"github.com/pkg/sftp"
)

// fakeStore records what the stager reports.
type fakeStore struct {
	staged chan catalog.StageResult
	mu     sync.Mutex
	links  map[string]dc.Link
}

func newFakeStore() *fakeStore {
	return &fakeStore{staged: make(chan catalog.StageResult, 100), links: map[string]dc.Link{}}
}

func (f *fakeStore) Staged(_ context.Context, r catalog.StageResult) error {
	f.staged <- r
	return nil
}

func (f *fakeStore) MeasuredLink(site string, l dc.Link) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.links[site] = l
}

func (f *fakeStore) link(site string) (dc.Link, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[site]
	return l, ok
}

func (f *fakeStore) next(t *testing.T) catalog.StageResult {
	t.Helper()
	select {
	case r := <-f.staged:
		return r
	case <-time.After(time.Minute):
		t.Fatal("no stage result within a minute")
		return catalog.StageResult{}
	}
}

// testPlaces are sites whose data roots are temporary directories; "local"
// is the CLS host's own (host), rooted in a directory too. wrap, if set,
// wraps a site's place.
type testPlaces struct {
	roots map[string]string
	wrap  func(site string, p stage.Place) stage.Place
}

func newTestPlaces(t *testing.T, sites ...string) *testPlaces {
	tp := &testPlaces{roots: map[string]string{}}
	for _, s := range append([]string{catalog.LocalSite}, sites...) {
		tp.roots[s] = t.TempDir()
	}
	return tp
}

func (tp *testPlaces) place(_ context.Context, p catalog.Place) (stage.Place, bool, error) {
	root, ok := tp.roots[p.Site]
	if strings.HasPrefix(p.Site, "down") {
		return nil, false, &unreachableError{p.Site, errors.New("dial tcp: connection refused")}
	}
	if !ok {
		return nil, false, &noSiteError{p.Site}
	}
	var pl stage.Place = stage.Dir{Root: root}
	if tp.wrap != nil {
		pl = tp.wrap(p.Site, pl)
	}
	return pl, p.Site == catalog.LocalSite, nil
}

// put writes a file at a site and returns its SHA-256.
func (tp *testPlaces) put(t *testing.T, site, p string, data []byte) string {
	t.Helper()
	full := filepath.Join(tp.roots[site], p)
	if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func (tp *testPlaces) read(site, p string) ([]byte, error) {
	return os.ReadFile(filepath.Join(tp.roots[site], p))
}

func startStager(t *testing.T, workers int, tp *testPlaces) (*stager, *fakeStore) {
	st := newStager(workers, tp.place, func(string) dc.Link { return dc.Link{Latency: 7, Bandwidth: 7e6} }, nil)
	fs := newFakeStore()
	st.start(fs)
	t.Cleanup(st.stop)
	return st, fs
}

func at(site string) catalog.Place { return catalog.Place{Site: site} }

// A staged file arrives complete at the target place, and its transfer is
// reported with the bytes, checksum and source; the sites' measured links
// reach the store, the prior kept for what is not measured yet.
func TestStagerMoves(t *testing.T) {
	tp := newTestPlaces(t, "a", "b")
	data := []byte("seqs of p1\n")
	sum := tp.put(t, "a", "/w/seqs/p1.fa", data)
	st, fs := startStager(t, 2, tp)
	st.Stage(catalog.StageRequest{Path: "/w/seqs/p1.fa", To: at("b"), From: []catalog.Place{at("a")}, Size: int64(len(data)), Job: 7})
	r := fs.next(t)
	if r.Err != nil || r.Bytes != int64(len(data)) || r.SHA256 != sum || r.From != at("a") || r.To != at("b") || r.Job != 7 || r.Path != "/w/seqs/p1.fa" || r.Started.IsZero() {
		t.Fatalf("result %+v", r)
	}
	if got, err := tp.read("b", "/w/seqs/p1.fa"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("at b: %q %v", got, err)
	}
	for _, s := range []string{"a", "b"} {
		l, ok := fs.link(s)
		if !ok || l.Latency <= 0 || l.Bandwidth != 7e6 {
			t.Errorf("link of %s: %+v %v; want a measured latency and the prior bandwidth", s, l, ok)
		}
	}

	// The hash is computed when unknown and checked when known.
	st.Stage(catalog.StageRequest{Path: "/w/seqs/p1.fa", To: at("local"), From: []catalog.Place{at("b")}, Size: -1, SHA256: strings.Repeat("0", 64)})
	if r := fs.next(t); r.Err == nil || r.Permanent {
		t.Errorf("a wrong checksum: %+v", r)
	}
	if _, err := tp.read("local", "/w/seqs/p1.fa"); err == nil {
		t.Error("a file with the wrong checksum appeared")
	}
}

// A user's file on the CLS host that changed since submit is never staged:
// the request ends Permanent with the reason.
func TestStagerChangedInput(t *testing.T) {
	tp := newTestPlaces(t, "a")
	data := []byte("version 1\n")
	tp.put(t, "local", "/in.txt", data)
	fi, err := os.Stat(filepath.Join(tp.roots["local"], "in.txt"))
	if err != nil {
		t.Fatal(err)
	}
	st, fs := startStager(t, 1, tp)
	for _, tc := range []struct {
		name    string
		size    int64
		mtime   time.Time
		changed bool
	}{
		{"same", int64(len(data)), fi.ModTime(), false},
		{"same to the second", int64(len(data)), fi.ModTime().Truncate(time.Second), false},
		{"older", int64(len(data)), fi.ModTime().Add(-time.Hour), true},
		{"other size", 3, fi.ModTime(), true},
	} {
		os.RemoveAll(filepath.Join(tp.roots["a"], "in.txt"))
		st.Stage(catalog.StageRequest{Path: "/in.txt", To: at("a"), From: []catalog.Place{at("local")}, Size: tc.size, ModTime: tc.mtime})
		r := fs.next(t)
		_, rerr := tp.read("a", "/in.txt")
		if tc.changed {
			if r.Err == nil || !r.Permanent || !strings.Contains(r.Err.Error(), "changed after submission") || rerr == nil {
				t.Errorf("%s: %+v (at a: %v); want a permanent failure, no file", tc.name, r, rerr)
			}
		} else if r.Err != nil || rerr != nil {
			t.Errorf("%s: %+v (at a: %v)", tc.name, r, rerr)
		}
	}
}

// A source that lacks the file gives way to the next; lacking everywhere
// is permanent.
func TestStagerNextSource(t *testing.T) {
	tp := newTestPlaces(t, "a", "b", "c")
	data := []byte("out of job 1\n")
	sum := tp.put(t, "c", "/o/x", data)
	st, fs := startStager(t, 1, tp)
	st.Stage(catalog.StageRequest{Path: "/o/x", To: at("b"), From: []catalog.Place{at("a"), at("gone"), at("c")}, Size: -1, SHA256: sum})
	if r := fs.next(t); r.Err != nil || r.From != at("c") || r.Bytes != int64(len(data)) {
		t.Fatalf("result %+v", r)
	}
	if got, _ := tp.read("b", "/o/x"); !bytes.Equal(got, data) {
		t.Fatalf("at b: %q", got)
	}
	st.Stage(catalog.StageRequest{Path: "/o/y", To: at("b"), From: []catalog.Place{at("a"), at("c")}, Size: -1})
	if r := fs.next(t); r.Err == nil || !r.Permanent {
		t.Errorf("missing everywhere: %+v", r)
	}
	// An unreachable place is not proof the file is gone.
	st.Stage(catalog.StageRequest{Path: "/o/y", To: at("b"), From: []catalog.Place{at("a"), at("gone")}, Size: -1})
	if r := fs.next(t); r.Err == nil || r.Permanent {
		t.Errorf("missing at one place, another unreachable: %+v", r)
	}
	st.Stage(catalog.StageRequest{Path: "/o/x", To: at("b"), Size: -1})
	if r := fs.next(t); r.Err == nil || !r.Permanent {
		t.Errorf("no source: %+v", r)
	}
}

// gate is a place whose Open waits until released (or cancelled),
// counting the opens waiting at once.
type gate struct {
	stage.Place
	release   chan struct{}
	cur, high atomic.Int32
}

func (g *gate) Open(ctx context.Context, p string) (io.ReadCloser, stage.Info, error) {
	n := g.cur.Add(1)
	for {
		h := g.high.Load()
		if n <= h || g.high.CompareAndSwap(h, n) {
			break
		}
	}
	defer g.cur.Add(-1)
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, stage.Info{}, ctx.Err()
	}
	return g.Place.Open(ctx, p)
}

// gate makes site's place a gate.
func (tp *testPlaces) gate(site string) *gate {
	g := &gate{Place: stage.Dir{Root: tp.roots[site]}, release: make(chan struct{})}
	tp.wrap = func(s string, p stage.Place) stage.Place {
		if s != site {
			return p
		}
		return g
	}
	return g
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// No more transfers run at once than the stager has workers; the others
// wait their turn, queued without blocking the caller.
func TestStagerBound(t *testing.T) {
	tp := newTestPlaces(t, "a", "b")
	g := tp.gate("a")
	const n = 7
	for i := range n {
		tp.put(t, "a", fmt.Sprintf("/f%d", i), []byte{byte(i)})
	}
	st, fs := startStager(t, 2, tp)
	for i := range n {
		st.Stage(catalog.StageRequest{Path: fmt.Sprintf("/f%d", i), To: at("b"), From: []catalog.Place{at("a")}, Size: 1})
	}
	waitFor(t, "two transfers", func() bool { return g.cur.Load() == 2 })
	close(g.release)
	for range n {
		if r := fs.next(t); r.Err != nil {
			t.Error(r.Err)
		}
	}
	if h := g.high.Load(); h != 2 {
		t.Errorf("%d transfers at once; want 2", h)
	}
}

// stop cancels the transfers running without reporting them, drops the
// queue, and returns; a request after it is ignored.
func TestStagerStop(t *testing.T) {
	tp := newTestPlaces(t, "a", "b")
	g := tp.gate("a")
	tp.put(t, "a", "/f", []byte("x"))
	st := newStager(1, tp.place, nil, nil)
	fs := newFakeStore()
	// Queued before start: served once started.
	for range 3 {
		st.Stage(catalog.StageRequest{Path: "/f", To: at("b"), From: []catalog.Place{at("a")}, Size: -1})
	}
	st.start(fs)
	waitFor(t, "a transfer", func() bool { return g.cur.Load() == 1 })
	done := make(chan struct{})
	go func() { st.stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("stop did not return")
	}
	st.Stage(catalog.StageRequest{Path: "/f", To: at("b"), From: []catalog.Place{at("a")}, Size: -1})
	select {
	case r := <-fs.staged:
		t.Errorf("reported after stop: %+v", r)
	default:
	}
	if _, err := tp.read("b", "/f"); err == nil {
		t.Error("a cancelled transfer left the file")
	}
	entries, _ := os.ReadDir(tp.roots["b"])
	if len(entries) != 0 {
		t.Errorf("left at b: %v", entries)
	}
}

// A site whose login host cannot be reached is named in the result's
// Unreachable, as the target or as a source, and nothing else is; so is a
// target site removed while its jobs' inputs were on their way (its jobs
// wait or run elsewhere: no fault of the file), but not a source that is
// no site (the file cannot come from there).
func TestStagerUnreachable(t *testing.T) {
	tp := newTestPlaces(t, "a", "b")
	tp.put(t, "a", "/o/x", []byte("x"))
	st, fs := startStager(t, 1, tp)
	const down = "cannot be reached: dial tcp: connection refused"
	for _, tc := range []struct {
		to   string
		from []string
		want []catalog.Place
		why  string
	}{
		{"down1", []string{"a"}, []catalog.Place{at("down1")}, down},
		{"b", []string{"down1", "gone", "down2"}, []catalog.Place{at("down1"), at("down2")}, down},
		{"b", []string{"gone"}, nil, "no site gone"},
		{"gone", []string{"a"}, []catalog.Place{at("gone")}, "no site gone"},
	} {
		var from []catalog.Place
		for _, f := range tc.from {
			from = append(from, at(f))
		}
		st.Stage(catalog.StageRequest{Path: "/o/x", To: at(tc.to), From: from, Size: -1})
		r := fs.next(t)
		if r.Err == nil || !slices.Equal(r.Unreachable, tc.want) {
			t.Errorf("to %s from %v: err %v, unreachable %v; want %v", tc.to, tc.from, r.Err, r.Unreachable, tc.want)
		}
		if r.Err != nil && !strings.Contains(r.Err.Error(), tc.why) {
			t.Errorf("to %s from %v: error %q does not say why (%q)", tc.to, tc.from, r.Err, tc.why)
		}
	}
}

// A user's file on the CLS host rewritten in place, at its size, while it
// is read (after the check against submit) is not staged in its new form
// either: to another site, no copy takes its name there; to a place on the
// CLS host's filesystem, its checksum is not taken.
func TestStagerInputRewrittenWhileRead(t *testing.T) {
	for _, to := range []string{"a", catalog.LocalSite} {
		t.Run(to, func(t *testing.T) {
			tp := newTestPlaces(t, "a")
			tp.put(t, catalog.LocalSite, "/in.txt", []byte("version 1\n"))
			full := filepath.Join(tp.roots[catalog.LocalSite], "in.txt")
			fi, err := os.Stat(full)
			if err != nil {
				t.Fatal(err)
			}
			tp.wrap = func(site string, p stage.Place) stage.Place {
				if site != catalog.LocalSite {
					return p
				}
				return rewriteOnOpen{p, func() {
					if err := os.WriteFile(full, []byte("version 2\n"), 0o600); err != nil {
						t.Error(err)
					}
					if err := os.Chtimes(full, fi.ModTime().Add(time.Hour), fi.ModTime().Add(time.Hour)); err != nil {
						t.Error(err)
					}
				}}
			}
			st, fs := startStager(t, 1, tp)
			st.Stage(catalog.StageRequest{Path: "/in.txt", To: at(to), From: []catalog.Place{at(catalog.LocalSite)}, Size: fi.Size(), ModTime: fi.ModTime()})
			r := fs.next(t)
			if r.Err == nil || !r.Permanent || !strings.Contains(r.Err.Error(), "changed after submission") {
				t.Errorf("result %+v; want a permanent failure: changed after submission", r)
			}
			if got, err := tp.read("a", "/in.txt"); err == nil {
				t.Errorf("at a: %q; want no file", got)
			}
		})
	}
}

// rewriteOnOpen is a place whose files are rewritten (by rewrite) just
// after they are opened for reading, before any byte is read.
type rewriteOnOpen struct {
	stage.Place
	rewrite func()
}

func (p rewriteOnOpen) Open(ctx context.Context, path string) (io.ReadCloser, stage.Info, error) {
	rc, info, err := p.Place.Open(ctx, path)
	if err == nil {
		p.rewrite()
	}
	return rc, info, err
}

// diskFull is a place whose disk is full while full is set: every file
// made there fails on its first write with no room.
type diskFull struct {
	stage.Place
	full *atomic.Bool
}

func (f diskFull) Create(ctx context.Context, p string) (stage.Temp, error) {
	t, err := f.Place.Create(ctx, p)
	if err != nil || !f.full.Load() {
		return t, err
	}
	return fullTemp{t}, nil
}

type fullTemp struct{ stage.Temp }

func (fullTemp) Write([]byte) (int, error) {
	return 0, &stage.NoSpaceError{Dir: "/data", Free: 0, Need: -1, Err: errors.New(`sftp: "Failure" (SSH_FX_FAILURE)`)}
}

// A transfer to a place whose disk is full is the place's fault: it
// does not count against the file (Full, never Permanent), the place
// takes no file for a time that doubles with each full transfer, cls site
// list says why, and the first transfer there that succeeds clears it.
func TestStagerFullTarget(t *testing.T) {
	tp := newTestPlaces(t, "a", "b")
	var full atomic.Bool
	full.Store(true)
	tp.wrap = func(site string, p stage.Place) stage.Place {
		if site == "b" {
			return diskFull{p, &full}
		}
		return p
	}
	sum := tp.put(t, "a", "/o/x", []byte("xyz"))
	st, fs := startStager(t, 1, tp)
	req := catalog.StageRequest{Path: "/o/x", To: at("b"), From: []catalog.Place{at("a"), at(catalog.LocalSite)}, Size: 3, SHA256: sum}
	for i, want := range []time.Duration{catalog.PlaceDownFor, 2 * catalog.PlaceDownFor, 4 * catalog.PlaceDownFor} {
		st.Stage(req)
		r := fs.next(t)
		if r.Err == nil || !r.Full || r.FullFor != want || r.Permanent || !errors.Is(r.Err, stage.ErrNoSpace) || r.From != at("a") {
			t.Fatalf("try %d: err %v, full %v for %s, permanent %v, from %v; want full for %s", i, r.Err, r.Full, r.FullFor, r.Permanent, r.From, want)
		}
		if !strings.Contains(r.Err.Error(), "b has no room (its jobs wait") {
			t.Errorf("error %q does not say the site is full", r.Err)
		}
	}
	if note := st.full.note("b"); !strings.HasPrefix(note, "data root full since ") || !strings.Contains(note, "no space left in /data (0 bytes free)") {
		t.Errorf("site note %q", note)
	}
	if note := st.full.note("a"); note != "" {
		t.Errorf("site a: note %q", note)
	}
	full.Store(false)
	st.Stage(req)
	if r := fs.next(t); r.Err != nil || r.Full {
		t.Fatalf("room again: %v", r.Err)
	}
	if note := st.full.note("b"); note != "" {
		t.Errorf("after a transfer that succeeded: note %q", note)
	}
}

// cutPlace is a place whose connection is cut under the first write of
// every file made there while cut is set.
type cutPlace struct {
	stage.Place
	cut *atomic.Bool
}

func (c cutPlace) Create(ctx context.Context, p string) (stage.Temp, error) {
	t, err := c.Place.Create(ctx, p)
	if err != nil || !c.cut.Load() {
		return t, err
	}
	return cutTemp{t}, nil
}

type cutTemp struct{ stage.Temp }

func (cutTemp) Write([]byte) (int, error) { return 0, sftp.ErrSSHFxConnectionLost }

// A transfer whose connection to a login host is cut under it is no
// fault of the file: the places off the CLS host it used are left alone
// a while (Unreachable), so the file's tries are not spent at once on the
// dead connection, and the next transfer there goes through.
func TestStagerConnectionCut(t *testing.T) {
	tp := newTestPlaces(t, "a", "b")
	var cut atomic.Bool
	cut.Store(true)
	tp.wrap = func(site string, p stage.Place) stage.Place {
		if site == "b" {
			return cutPlace{p, &cut}
		}
		return p
	}
	data := []byte("xyz")
	sum := tp.put(t, "a", "/o/x", data)
	tp.put(t, catalog.LocalSite, "/o/x", data)
	st, fs := startStager(t, 1, tp)
	for _, tc := range []struct {
		from []catalog.Place
		want []catalog.Place
	}{
		{[]catalog.Place{at(catalog.LocalSite)}, []catalog.Place{at("b")}},
		{[]catalog.Place{at("a"), at(catalog.LocalSite)}, []catalog.Place{at("a"), at("b")}},
	} {
		st.Stage(catalog.StageRequest{Path: "/o/x", To: at("b"), From: tc.from, Size: 3, SHA256: sum})
		r := fs.next(t)
		if r.Err == nil || r.Permanent || !slices.Equal(r.Unreachable, tc.want) || !errors.Is(r.Err, sftp.ErrSSHFxConnectionLost) {
			t.Errorf("from %v: err %v, permanent %v, unreachable %v; want %v unreachable", tc.from, r.Err, r.Permanent, r.Unreachable, tc.want)
		}
	}
	cut.Store(false)
	st.Stage(catalog.StageRequest{Path: "/o/x", To: at("b"), From: []catalog.Place{at(catalog.LocalSite)}, Size: 3, SHA256: sum})
	if r := fs.next(t); r.Err != nil || len(r.Unreachable) > 0 {
		t.Fatalf("after the cut: err %v, unreachable %v", r.Err, r.Unreachable)
	}
	if got, err := tp.read("b", "/o/x"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("at b: %q, %v", got, err)
	}
}

// stallPlace is a place whose writes, while stall is set, wait for ever,
// as through a peer that went silent with its connection up, until the
// place is cut (stage.Cutter), when they fail as SFTP's do on a closed
// connection.
type stallPlace struct {
	stage.Place
	stall *atomic.Bool
	cut   chan struct{}
	once  *sync.Once
}

func (s stallPlace) Cut() bool { s.once.Do(func() { close(s.cut) }); return true }

func (s stallPlace) Create(ctx context.Context, p string) (stage.Temp, error) {
	t, err := s.Place.Create(ctx, p)
	if err != nil || !s.stall.Load() {
		return t, err
	}
	return stallTemp{t, s.cut}, nil
}

type stallTemp struct {
	stage.Temp
	cut chan struct{}
}

func (t stallTemp) Write([]byte) (int, error) {
	<-t.cut
	return 0, sftp.ErrSSHFxConnectionLost
}

// A transfer that stalls (no byte moved for the Mover's Stall) fails as
// one whose connection was cut: its connection is cut, the place off the
// CLS host is left alone a while (Unreachable) rather than the file's
// tries spent, and the next transfer there goes through.
func TestStagerStalledTransfer(t *testing.T) {
	tp := newTestPlaces(t, "b")
	var stall atomic.Bool
	stall.Store(true)
	cut := make(chan struct{})
	tp.wrap = func(site string, p stage.Place) stage.Place {
		if site == "b" {
			return stallPlace{p, &stall, cut, &sync.Once{}}
		}
		return p
	}
	data := []byte("xyz")
	sum := tp.put(t, catalog.LocalSite, "/o/x", data)
	st, fs := startStager(t, 1, tp)
	st.mover.Stall = 200 * time.Millisecond
	st.Stage(catalog.StageRequest{Path: "/o/x", To: at("b"), From: []catalog.Place{at(catalog.LocalSite)}, Size: 3, SHA256: sum})
	r := fs.next(t)
	if !errors.Is(r.Err, stage.ErrStalled) || r.Permanent || !slices.Equal(r.Unreachable, []catalog.Place{at("b")}) {
		t.Errorf("a stalled transfer: err %v, permanent %v, unreachable %v; want ErrStalled, b unreachable", r.Err, r.Permanent, r.Unreachable)
	}
	select {
	case <-cut:
	default:
		t.Error("the stalled transfer's place was not cut")
	}
	stall.Store(false)
	st.Stage(catalog.StageRequest{Path: "/o/x", To: at("b"), From: []catalog.Place{at(catalog.LocalSite)}, Size: 3, SHA256: sum})
	if r := fs.next(t); r.Err != nil || len(r.Unreachable) > 0 {
		t.Fatalf("after the stall: err %v, unreachable %v", r.Err, r.Unreachable)
	}
	if got, err := tp.read("b", "/o/x"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("at b: %q, %v", got, err)
	}
}
