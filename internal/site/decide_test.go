package site

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/protocol"
)

func TestDecide(t *testing.T) {
	const slow = 10 * time.Minute
	for _, tc := range []struct {
		name string
		c    Counts
		want Decision
	}{
		{"no work, nothing there", Counts{Min: 2, Max: 8}, Decision{}},
		{"drained: cancel queued, keep running", Counts{Queued: 3, Running: 2, Min: 1, Max: 8}, Decision{Cancel: 3}},
		{"work: up to what it warrants", Counts{Ready: 3, Min: 0, Max: 8, Slots: 1}, Decision{Submit: 3}},
		{"work: min applies", Counts{Ready: 1, Min: 2, Max: 8, Slots: 1}, Decision{Submit: 2}},
		{"work: max caps", Counts{Ready: 100, Min: 0, Max: 8, Slots: 1}, Decision{Submit: 8}},
		{"slots divide the need", Counts{Ready: 9, Min: 0, Max: 8, Slots: 4}, Decision{Submit: 3}},
		{"running ones count", Counts{Ready: 5, Running: 3, Max: 8, Slots: 1}, Decision{Submit: 2}},
		{"busy placeholders still need room", Counts{Ready: 2, Executing: 3, Running: 3, Max: 8, Slots: 1}, Decision{Submit: 2}},
		{"resubmit after exits", Counts{Ready: 50, Running: 1, Max: 4, Slots: 1}, Decision{Submit: 3}},
		{"surplus queued cancelled", Counts{Ready: 1, Queued: 4, Max: 8, Slots: 1}, Decision{Cancel: 3}},
		{"running never cancelled", Counts{Ready: 1, Running: 5, Max: 8, Slots: 1}, Decision{}},
		{"throttled: no more while one waits long", Counts{Ready: 50, Queued: 1, Running: 1, Max: 8, Slots: 1, OldestQueued: 2 * slow, ThrottleAfter: slow}, Decision{Throttled: true}},
		{"throttled: extra queued cancelled", Counts{Ready: 50, Queued: 4, Max: 8, Slots: 1, OldestQueued: 2 * slow, ThrottleAfter: slow}, Decision{Cancel: 3, Throttled: true}},
		{"not yet slow", Counts{Ready: 50, Queued: 2, Max: 8, Slots: 1, OldestQueued: slow / 2, ThrottleAfter: slow}, Decision{Submit: 6}},
		{"no throttle configured", Counts{Ready: 50, Queued: 2, Max: 8, Slots: 1, OldestQueued: time.Hour}, Decision{Submit: 6}},
		{"others take part of the work", Counts{Ready: 10, Elsewhere: 6, Max: 8, Slots: 1}, Decision{Submit: 4}},
		{"others take all of it", Counts{Ready: 10, Elsewhere: 12, Max: 8, Slots: 1}, Decision{}},
		{"others take all of it: queued here cancelled", Counts{Ready: 10, Elsewhere: 10, Queued: 3, Max: 8, Slots: 1}, Decision{Cancel: 3}},
		{"others take all of it: running kept", Counts{Ready: 10, Elsewhere: 10, Queued: 1, Running: 2, Executing: 2, Max: 8, Slots: 1}, Decision{Cancel: 1}},
		{"others take all of it: min still applies", Counts{Ready: 10, Elsewhere: 10, Min: 2, Max: 8, Slots: 1}, Decision{Submit: 2}},
		{"others' share in slots", Counts{Ready: 20, Elsewhere: 4, Max: 8, Slots: 4}, Decision{Submit: 4}},
		{"throttled: the probe stays while others take the work", Counts{Ready: 10, Elsewhere: 10, Queued: 3, Max: 8, Slots: 1, OldestQueued: 2 * slow, ThrottleAfter: slow}, Decision{Cancel: 2, Throttled: true}},
		{"throttled: running ones and a probe", Counts{Ready: 50, Queued: 3, Running: 2, Max: 8, Slots: 1, OldestQueued: 2 * slow, ThrottleAfter: slow}, Decision{Cancel: 2, Throttled: true}},
		{"throttled at max: no probe", Counts{Ready: 50, Queued: 1, Running: 4, Max: 4, Slots: 1, OldestQueued: 2 * slow, ThrottleAfter: slow}, Decision{Cancel: 1, Throttled: true}},
		{"throttled, then drained: probe cancelled", Counts{Queued: 1, Max: 8, Slots: 1, OldestQueued: 2 * slow, ThrottleAfter: slow}, Decision{Cancel: 1}},
		{"steady: min kept without work", Counts{Min: 4, Max: 4, Slots: 1, Steady: true}, Decision{Submit: 4}},
		{"steady: all there, nothing to do", Counts{Running: 4, Min: 4, Max: 4, Slots: 8, Steady: true}, Decision{}},
		{"steady: an exit replaced", Counts{Running: 3, Min: 4, Max: 4, Slots: 1, Steady: true}, Decision{Submit: 1}},
		{"steady: never more than max", Counts{Ready: 100, Running: 4, Min: 4, Max: 4, Slots: 1, Steady: true}, Decision{}},
		// A stalled site (placeholders that never connect) keeps one probe.
		{"stalled: one probe submitted", Counts{Ready: 50, Max: 8, Slots: 1, Stalled: true}, Decision{Submit: 1}},
		{"stalled: the probe is there", Counts{Ready: 50, Running: 1, Max: 8, Slots: 1, Stalled: true}, Decision{}},
		{"stalled: extra queued cancelled", Counts{Ready: 50, Queued: 3, Max: 8, Slots: 1, Stalled: true}, Decision{Cancel: 2}},
		{"erring: one probe submitted", Counts{Ready: 50, Max: 8, Slots: 1, Erring: true}, Decision{Submit: 1}},
		{"erring: extra queued cancelled", Counts{Ready: 50, Queued: 3, Max: 8, Slots: 1, Erring: true}, Decision{Cancel: 2}},
		{"stalled: min does not apply", Counts{Ready: 50, Min: 4, Max: 8, Slots: 1, Stalled: true}, Decision{Submit: 1}},
		{"stalled, no work: nothing", Counts{Queued: 1, Max: 8, Slots: 1, Stalled: true}, Decision{Cancel: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.c); got != tc.want {
				t.Errorf("Decide(%+v) = %+v, want %+v", tc.c, got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := func(s protocol.SiteSpec) protocol.SiteSpec {
		if err := Validate(&s); err != nil {
			t.Fatalf("Validate(%+v): %v", s, err)
		}
		return s
	}
	s := ok(protocol.SiteSpec{Name: "a", Type: SGE, SSH: "u@login:2222"})
	if s.Connect != Direct || s.Max != 1 || s.Slots != 1 || s.Walltime != 3600 || s.Idle != 60 {
		t.Errorf("defaults: %+v", s)
	}
	ok(protocol.SiteSpec{Name: "l", Type: Local, Min: 1, Max: 4})
	ok(protocol.SiteSpec{Name: "a", Type: Slurm, SSH: "u@h", ConnectTimeout: 15})
	if s := ok(protocol.SiteSpec{Name: "a", Type: SGE, SSH: "u@h", Slots: 4}); s.PE != "smp" {
		t.Errorf("SGE with 4 slots: pe %q, want the default smp", s.PE)
	}
	if s := ok(protocol.SiteSpec{Name: "a", Type: SGE, SSH: "u@h", Slots: 4, PE: "mpi*"}); s.PE != "mpi*" {
		t.Errorf("pe %q, want mpi*", s.PE)
	}
	for _, s := range []protocol.SiteSpec{{Name: "a", Type: SGE, SSH: "u@h"}, {Name: "a", Type: Slurm, SSH: "u@h", Slots: 4}} {
		if s := ok(s); s.PE != "" {
			t.Errorf("%s with %d slots got pe %q", s.Type, s.Slots, s.PE)
		}
	}
	if s := ok(protocol.SiteSpec{Name: "l", Type: Local}); !s.SharedFS {
		t.Error("a local site does not share the CLS host's filesystem")
	}
	for _, out := range []string{"", protocol.OutputModeFiles, protocol.OutputModeStreams} {
		if s := ok(protocol.SiteSpec{Name: "a", Type: Slurm, SSH: "u@h", Output: out}); s.Output != out {
			t.Errorf("--output %q became %q", out, s.Output)
		}
	}
	ok(protocol.SiteSpec{Name: "a", Type: SGE, SSH: "u@h", DataRoot: "/scratch/u/mq"})
	ok(protocol.SiteSpec{Name: "a", Type: SGE, SSH: "u@h", DataRoot: "data/mq"})
	if s := ok(protocol.SiteSpec{Name: "a", Type: Slurm, SSH: "u@h", SharedFS: true}); !s.SharedFS || s.DataRoot != "" {
		t.Errorf("--shared-fs: %+v", s)
	}
	for _, bad := range []protocol.SiteSpec{
		{Name: "a", Type: Local, DataRoot: "/d"},
		{Name: "a", Type: SGE, SSH: "u@h", DataRoot: "/d", SharedFS: true},
		{Name: "a", Type: SGE, SSH: "u@h", DataRoot: "/d\nx"},
		{Name: "a", Type: SGE, SSH: "u@h", DataRoot: "/d\x00x"},
		{Name: "a", Type: SGE, SSH: "u@h", DataRoot: "/d/../etc"},
		{Name: "a", Type: SGE, SSH: "u@h", DataRoot: "/"},
		{Name: "a", Type: SGE, SSH: "u@h", DataRoot: "."},
		{Name: "a", Type: SGE, SSH: "u@h", DataRoot: "/" + strings.Repeat("d", MaxDataRoot)},
		{Name: "1a", Type: SGE, SSH: "u@h"},
		{Name: "a", Type: SGE, SSH: "u@h", Output: "file"},
		{Name: "l", Type: Local, Output: "Streams"},
		{Name: "a b", Type: SGE, SSH: "u@h"},
		{Name: "a", Type: "lsf", SSH: "u@h"},
		{Name: "a", Type: SGE},
		{Name: "a", Type: SGE, SSH: "login"},
		{Name: "a", Type: SGE, SSH: "u@h:99999"},
		{Name: "a", Type: Local, SSH: "u@h"},
		{Name: "a", Type: SGE, SSH: "u@h", Min: 3, Max: 2},
		{Name: "a", Type: SGE, SSH: "u@h", Connect: "carrier-pigeon"},
		{Name: "a", Type: SGE, SSH: "u@h", Queue: "q; rm -rf ~"},
		{Name: "a", Type: SGE, SSH: "u@h", Queue: "q\v-l\vh_rt=999:0:0"},
		{Name: "a", Type: Slurm, SSH: "u@h", Queue: "q\r"},
		{Name: "a", Type: PBS, SSH: "u@h", Queue: "q\x1b[2J"},
		{Name: "a", Type: PBS, SSH: "u@h", Queue: "q\x00"},
		{Name: "a", Type: PBS, SSH: "u@h", Queue: "q\u0085x"},
		{Name: "a", Type: SGE, SSH: "u@h", SubmitArgs: `"unclosed`},
		{Name: "a", Type: SGE, SSH: "u@h", Walltime: 10},
		{Name: "a", Type: SGE, SSH: "u@h", ConnectTimeout: 0.5},
		{Name: "a", Type: SGE, SSH: "u@h", Walltime: 600, ConnectTimeout: 601},
		{Name: "a", Type: SGE, SSH: "u@h", ConnectTimeout: math.NaN()},
		{Name: "a", Type: SGE, SSH: "u@h", Slots: 5000},
		{Name: "a", Type: SGE, SSH: "u@h", Slots: 4, PE: "smp 4"},
		{Name: "a", Type: SGE, SSH: "u@h", Slots: 4, PE: "a/b"},
		{Name: "a", Type: SGE, SSH: "u@h", Slots: 4, PE: "x\n#$ -l h_rt=99:0:0"},
		{Name: "a", Type: SGE, SSH: "u@h", Slots: 4, PE: strings.Repeat("p", 513)},
		{Name: "a", Type: SGE, SSH: "u@h", Slots: 1, PE: "smp"},
		{Name: "a", Type: Slurm, SSH: "u@h", Slots: 4, PE: "smp"},
		{Name: "a", Type: Local, Slots: 4, PE: "smp"},
		{Name: "a", Type: Local, Jump: "u@j"},
		{Name: "a", Type: SGE, SSH: "u@h", Jump: "j"},
		{Name: "a", Type: SGE, SSH: "u@h", Jump: "u@j:0"},
		{Name: "a", Type: SGE, SSH: "u@h", Jump: "u@j\x1b[2J"},
		{Name: "a", Type: SGE, SSH: "u@h\r", Jump: "u@j"},
	} {
		if err := Validate(&bad); err == nil {
			t.Errorf("Validate(%+v) accepted", bad)
		}
	}
	for _, tc := range []struct{ in, user, addr string }{
		{"u@h", "u", "h:22"},
		{"u@h:2222", "u", "h:2222"},
		{"u@[::1]:2222", "u", "[::1]:2222"},
	} {
		u, a, err := ParseSSH(tc.in)
		if err != nil || u != tc.user || a != tc.addr {
			t.Errorf("ParseSSH(%q) = %q %q %v", tc.in, u, a, err)
		}
		u, a, err = ParseJump(tc.in)
		if err != nil || u != tc.user || a != tc.addr {
			t.Errorf("ParseJump(%q) = %q %q %v", tc.in, u, a, err)
		}
	}
	if _, _, err := ParseJump("j"); err == nil || !strings.HasPrefix(err.Error(), "--jump ") {
		t.Errorf("ParseJump(\"j\"): %v; want an error naming --jump", err)
	}
}

// fakeSite is a batch system in memory.
type fakeSite struct {
	mu           sync.Mutex
	next         int
	jobs         map[string]batch.State
	listErr      error
	startAtOnce  bool            // placeholders run as soon as submitted
	brokenAtOnce bool            // placeholders go into the error state as soon as submitted (SGE's Eqw)
	exitAtOnce   bool            // placeholders end as soon as submitted, never registering
	runOnce      bool            // placeholders run as soon as submitted and end after one listing, never registering
	once         map[string]bool // the placeholders submitted under runOnce, which end so even after it is off
	submitted    int
	submitErr    error             // the batch system refuses submissions
	why          map[string]string // why a placeholder waits, by id
	onSubmit     func()            // called at each Submit, outside mu
	lists        int               // List calls, those that failed too
	explain      string            // what Explain says of a placeholder still in the error state
}

// Explain is the batch system's reason for a placeholder in its error
// state, which it has only until the placeholder is cancelled.
func (f *fakeSite) Explain(_ context.Context, id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.jobs[id] != batch.Error {
		return ""
	}
	return f.explain
}

func (f *fakeSite) Submit(_ context.Context, n int) ([]string, error) {
	f.mu.Lock()
	hook := f.onSubmit
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.submitErr != nil {
		return nil, f.submitErr
	}
	var ids []string
	for range n {
		f.next++
		id := strconv.Itoa(f.next)
		f.jobs[id] = batch.Queued
		if f.startAtOnce {
			f.jobs[id] = batch.Running
		}
		if f.brokenAtOnce {
			f.jobs[id] = batch.Error
		}
		if f.exitAtOnce {
			delete(f.jobs, id)
		}
		if f.runOnce {
			f.jobs[id] = batch.Running
			if f.once == nil {
				f.once = map[string]bool{}
			}
			f.once[id] = true
		}
		f.submitted++
		ids = append(ids, id)
	}
	return ids, nil
}

func (f *fakeSite) List(context.Context) ([]batch.Placeholder, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	var ps []batch.Placeholder
	for id, st := range f.jobs {
		ps = append(ps, batch.Placeholder{ID: id, State: st, Why: f.why[id]})
		if f.once[id] && st == batch.Running {
			// Seen running once, then gone: one submitted while the site
			// failed fails so after the test mends it.
			delete(f.jobs, id)
			delete(f.once, id)
		}
	}
	return ps, nil
}

func (f *fakeSite) Cancel(_ context.Context, ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		delete(f.jobs, id)
	}
	return nil
}

func (f *fakeSite) Close() error { return nil }

// startAll has every placeholder start running.
func (f *fakeSite) startAll() {
	f.set(func(j map[string]batch.State) {
		for id := range j {
			j[id] = batch.Running
		}
	})
}

func (f *fakeSite) set(fn func(map[string]batch.State)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.jobs)
}

func (f *fakeSite) count(st batch.State) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.jobs {
		if s == st {
			n++
		}
	}
	return n
}

type fakeStore struct {
	mu    sync.Mutex
	sites []protocol.SiteSpec
	ready int
	gone  []int64
}

func (s *fakeStore) AddSite(_ context.Context, spec protocol.SiteSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sites = append(s.sites, spec)
	return nil
}
func (s *fakeStore) RemoveSite(context.Context, string) error { return nil }
func (s *fakeStore) Sites(context.Context) ([]protocol.SiteSpec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sites, nil
}
func (s *fakeStore) SiteDemand(_ context.Context, _ float64, _ []int64, limit int) (int, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return min(s.ready, limit), 0, nil
}
func (s *fakeStore) PlaceholderGone(_ context.Context, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = append(s.gone, id)
	return nil
}
func (s *fakeStore) setReady(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = n
}

// startManager starts m; it stops when the test ends. The context is
// the one it runs under.
func startManager(t *testing.T, m *Manager) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return ctx
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// The Manager follows Decide against a live (fake) batch system: submits
// for ready work, resubmits after exits, cancels queued ones when the work
// drains, marks the site degraded when listing fails and recovers.
func TestManager(t *testing.T) {
	fs := &fakeSite{jobs: map[string]batch.State{}}
	st := &fakeStore{}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond,
		Open: func(protocol.SiteSpec, func(int)) (Site, error) { return fs, nil }}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Min: 1, Max: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h"}); err == nil {
		t.Fatal("a second site c was accepted")
	}
	time.Sleep(50 * time.Millisecond)
	if n := fs.count(batch.Queued); n != 0 {
		t.Fatalf("%d placeholders submitted without work", n)
	}
	st.setReady(10)
	eventually(t, "3 queued", func() bool { return fs.count(batch.Queued) == 3 })
	fs.startAll()
	eventually(t, "wait recorded", func() bool { return m.List()[0].Running == 3 && m.List()[0].QueueWaitS > 0 })
	// One ends, having registered and disconnected as agents do (one that
	// ends unregistered is a failure: TestFailingPlaceholdersBackOff).
	m.Placeholder(1, protocol.Register{Site: "c", Batch: "1"}, true)
	m.Placeholder(1, protocol.Register{Site: "c", Batch: "1"}, false)
	fs.set(func(j map[string]batch.State) { delete(j, "1") })
	eventually(t, "a replacement", func() bool { return fs.count(batch.Queued) == 1 })
	if got := m.List()[0]; got.Exited != 1 || got.State != StateOK {
		t.Fatalf("after one exit: %+v", got)
	}
	st.setReady(0)
	eventually(t, "queued cancelled", func() bool { return fs.count(batch.Queued) == 0 })
	if fs.count(batch.Running) != 2 {
		t.Fatalf("running placeholders were cancelled")
	}
	fs.set(func(map[string]batch.State) {})
	fs.mu.Lock()
	fs.listErr = errors.New("cannot reach the login host")
	fs.mu.Unlock()
	st.setReady(1)
	eventually(t, "degraded", func() bool { return m.List()[0].State == StateDegraded })
	if e := m.List()[0].Error; e != "cannot reach the login host" {
		t.Fatalf("error %q", e)
	}
	fs.mu.Lock()
	fs.listErr = nil
	fs.mu.Unlock()
	eventually(t, "recovered", func() bool { return m.List()[0].State == StateOK })
	m.Placeholder(7, protocol.Register{Site: "c"}, true)
	if _, err := m.Remove(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if len(fs.jobs) != 0 {
		t.Fatalf("remove left %v", fs.jobs)
	}
	if len(st.gone) != 1 || st.gone[0] != 7 {
		t.Fatalf("jobs of connected placeholders not requeued: %v", st.gone)
	}
}

// localFake is a local site in memory: placeholders are "processes" that
// run at once, and exit tells the Manager one ended, as site.Processes does.
type localFake struct {
	mu     sync.Mutex
	next   int
	procs  map[string]bool
	exited func(pid int)
	closed bool
	left   bool // Leave was called
}

func (f *localFake) Submit(_ context.Context, n int) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for range n {
		f.next++
		id := strconv.Itoa(100 + f.next)
		f.procs[id] = true
		ids = append(ids, id)
	}
	return ids, nil
}

func (f *localFake) List(context.Context) ([]batch.Placeholder, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ps []batch.Placeholder
	for id := range f.procs {
		ps = append(ps, batch.Placeholder{ID: id, State: batch.Running})
	}
	return ps, nil
}

func (f *localFake) Cancel(_ context.Context, ids []string) error {
	for _, id := range ids {
		pid, _ := strconv.Atoi(id)
		f.exit(pid)
	}
	return nil
}

func (f *localFake) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	return nil
}

func (f *localFake) Leave() {
	f.mu.Lock()
	f.left = true
	f.mu.Unlock()
}

func (f *localFake) exit(pid int) {
	f.mu.Lock()
	delete(f.procs, strconv.Itoa(pid))
	f.mu.Unlock()
	f.exited(pid)
}

func (f *localFake) alive() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.procs)
}

// The CLS's own local site (cls serve --local N) runs under the Manager:
// N placeholders without any work, listed, a process that ends has its
// jobs requeued at once (even when its connection closed first) and is
// replaced without waiting for the next poll; it cannot be added or
// removed, and it shadows a stored site of its name.
func TestManagerEmbedded(t *testing.T) {
	lf := &localFake{procs: map[string]bool{}}
	st := &fakeStore{sites: []protocol.SiteSpec{{Name: EmbeddedName, Type: Local, Max: 9, Slots: 1, Walltime: 3600, Idle: 60}}}
	m := &Manager{Store: st, Poll: time.Hour, // only a process's exit wakes the loop
		Embedded: []protocol.SiteSpec{{Name: EmbeddedName, Type: Local, Min: 3, Max: 3, Slots: 2}},
		Open: func(spec protocol.SiteSpec, exited func(int)) (Site, error) {
			if spec.Max != 3 {
				t.Errorf("opened the stored site %+v", spec)
			}
			lf.exited = exited
			return lf, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 placeholders without work", func() bool { return lf.alive() == 3 })
	eventually(t, "listed running", func() bool { l := m.List(); return len(l) == 1 && l[0].Running == 3 })
	info := m.List()[0]
	if !info.Embedded || info.Min != 3 || info.Max != 3 || info.Slots != 2 || info.State != StateOK || info.QueueWaitS != 0 {
		t.Errorf("listed as %+v", info)
	}
	m.Placeholder(7, protocol.Register{Site: EmbeddedName, PID: 101}, true)
	m.Placeholder(7, protocol.Register{Site: EmbeddedName, PID: 101}, false) // the socket closed before the exit was seen
	lf.exit(101)
	eventually(t, "a replacement", func() bool { return lf.alive() == 3 && m.List()[0].Exited == 1 })
	st.mu.Lock()
	gone := slices.Clone(st.gone)
	st.mu.Unlock()
	if !slices.Equal(gone, []int64{7}) {
		t.Errorf("jobs of the ended placeholder requeued for %v, want [7]", gone)
	}
	for _, err := range []error{
		func() error { _, err := m.Remove(ctx, EmbeddedName); return err }(),
		func() error { _, err := m.Add(ctx, protocol.SiteSpec{Name: EmbeddedName, Type: Local}); return err }(),
	} {
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(err.Error(), "--local") {
			t.Errorf("add or remove of the embedded site: %v", err)
		}
	}
	if lf.alive() != 3 {
		t.Errorf("%d placeholders after a refused remove, want 3", lf.alive())
	}
	m.Stop()
	if !lf.closed {
		t.Error("Stop did not close the local site (its placeholders would outlive the CLS)")
	}
}

// A Manager stopped leaving its placeholders (cls stop --keep-running)
// leaves a local site's running instead of closing it.
func TestManagerStopLeaving(t *testing.T) {
	lf := &localFake{procs: map[string]bool{}}
	m := &Manager{Store: &fakeStore{}, Poll: time.Hour,
		Embedded: []protocol.SiteSpec{{Name: EmbeddedName, Type: Local, Min: 2, Max: 2, Slots: 1}},
		Open:     func(protocol.SiteSpec, func(int)) (Site, error) { return lf, nil }}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 placeholders", func() bool { return lf.alive() == 2 })
	m.StopLeaving()
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.closed || !lf.left {
		t.Errorf("closed %v, left %v; want the site left, not closed", lf.closed, lf.left)
	}
}

// What a site offers other sites' demand (Counts.Elsewhere): idle slots
// of its running placeholders, never more than its ready jobs; queued ones
// offer nothing, throttled or not (late binding: the first to start takes
// the work).
func TestSupplyOf(t *testing.T) {
	const slow = time.Minute
	for _, tc := range []struct {
		name string
		c    Counts
		want int
	}{
		{"nothing there", Counts{Ready: 5, Max: 0}, 0},
		{"queued ones do not count", Counts{Ready: 10, Queued: 2, Max: 5, Slots: 1}, 0},
		{"nor their slots", Counts{Ready: 100, Queued: 2, Max: 2, Slots: 4}, 0},
		{"busy running ones offer nothing", Counts{Ready: 5, Running: 2, Executing: 2, Max: 2, Slots: 1}, 0},
		{"idle slots of running ones", Counts{Ready: 5, Running: 2, Executing: 1, Max: 2, Slots: 2}, 3},
		{"no more than the ready jobs that fit there", Counts{Ready: 3, Running: 8, Max: 8, Slots: 1}, 3},
		{"idle ones with nothing they can run", Counts{Ready: 0, Running: 4, Max: 4, Slots: 1}, 0},
		{"throttled: queued ones do not count", Counts{Ready: 50, Queued: 4, Max: 8, Slots: 1, OldestQueued: 2 * slow, ThrottleAfter: slow}, 0},
		{"throttled: running ones do", Counts{Ready: 50, Queued: 1, Running: 2, Executing: 1, Max: 8, Slots: 1, OldestQueued: 2 * slow, ThrottleAfter: slow}, 1},
		{"steady local placeholders", Counts{Ready: 50, Running: 4, Executing: 1, Min: 4, Max: 4, Slots: 1, Steady: true}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := supplyOf(tc.c); got != tc.want {
				t.Errorf("supplyOf(%+v) = %d, want %d", tc.c, got, tc.want)
			}
		})
	}
}

// Late binding across sites, and throttling: placeholders queued at a slow
// site do not hold back a fast one, which provides for all the ready work;
// idle running placeholders at the fast site make the slow one's queued
// ones surplus; a site whose placeholders wait too long keeps one probe,
// and recovers when it starts.
func TestManagerThrottleShiftsWork(t *testing.T) {
	slowSite := &fakeSite{jobs: map[string]batch.State{}}
	fastSite := &fakeSite{jobs: map[string]batch.State{}, startAtOnce: true}
	st := &fakeStore{ready: 6}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, ThrottleAfter: time.Hour,
		Open: func(spec protocol.SiteSpec, _ func(int)) (Site, error) {
			if spec.Name == "slow" {
				return slowSite, nil
			}
			return fastSite, nil
		}}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "slow", Type: SGE, SSH: "u@h", Max: 4}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "4 queued at the slow site", func() bool { return slowSite.count(batch.Queued) == 4 })
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "fast", Type: Slurm, SSH: "u@h", Max: 6}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the fast site provides for all 6 jobs", func() bool { return fastSite.count(batch.Running) == 6 })
	eventually(t, "the slow site's queued ones are surplus", func() bool { return slowSite.count(batch.Queued) == 0 })
	st.setReady(20) // more than the fast site takes: the slow one queues for the rest
	eventually(t, "4 queued at the slow site again", func() bool { return slowSite.count(batch.Queued) == 4 })
	m.mu.Lock()
	m.ThrottleAfter = 20 * time.Millisecond
	m.mu.Unlock()
	eventually(t, "slow throttled, one probe left", func() bool {
		return slowSite.count(batch.Queued) == 1 && siteInfo(m, "slow").State == StateThrottled
	})
	time.Sleep(50 * time.Millisecond) // many polls: nothing more
	if q, s := slowSite.count(batch.Queued), siteInfo(m, "slow"); q != 1 || s.State != StateThrottled {
		t.Fatalf("throttled site: %d queued (want the probe), state %s", q, s.State)
	}
	slowSite.startAll()
	eventually(t, "the slow site recovered", func() bool { return siteInfo(m, "slow").State == StateOK })
}

func siteInfo(m *Manager, name string) protocol.SiteInfo {
	for _, s := range m.List() {
		if s.Name == name {
			return s
		}
	}
	return protocol.SiteInfo{}
}

func TestNeverConnected(t *testing.T) {
	const to = 2 * time.Minute
	for _, tc := range []struct {
		name      string
		ps        []Started
		anonymous int
		timeout   time.Duration
		want      []string
	}{
		{"none running", nil, 0, to, nil},
		{"young: not yet", []Started{{ID: "1", Running: time.Minute}}, 0, to, nil},
		{"late and never connected", []Started{{ID: "1", Running: 3 * time.Minute}}, 0, to, []string{"1"}},
		{"late but connected", []Started{{ID: "1", Running: time.Hour, Connected: true}}, 0, to, nil},
		{"mixed", []Started{{ID: "1", Running: time.Hour, Connected: true}, {ID: "2", Running: 5 * time.Minute}, {ID: "3", Running: time.Minute}}, 0, to, []string{"2"}},
		{"anonymous connections spare the longest running", []Started{{ID: "1", Running: 9 * time.Minute}, {ID: "2", Running: 5 * time.Minute}, {ID: "3", Running: 7 * time.Minute}}, 1, to, []string{"3", "2"}},
		{"as many anonymous as late: none", []Started{{ID: "1", Running: 9 * time.Minute}}, 3, to, nil},
		{"no timeout: never", []Started{{ID: "1", Running: time.Hour}}, 0, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NeverConnected(tc.ps, tc.anonymous, tc.timeout)
			if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("NeverConnected = %v, want %v", got, tc.want)
			}
		})
	}
}

// diagnosingSite is a fakeSite that can say why a placeholder did not connect.
type diagnosingSite struct{ *fakeSite }

func (diagnosingSite) Diagnose(_ context.Context, id string) string {
	time.Sleep(20 * time.Millisecond) // over SSH: the site must not show degraded without the reason meanwhile
	return "its log /l/mq-c.o" + id + " ends: cannot reach the CLS"
}

// Placeholders that run without connecting are cancelled after the connect
// timeout; the site is degraded with the agent's own error and keeps one
// probe, and recovers when a placeholder connects.
func TestManagerNeverConnected(t *testing.T) {
	fs := &fakeSite{jobs: map[string]batch.State{}, startAtOnce: true}
	st := &fakeStore{ready: 10}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, ConnectTimeout: time.Hour,
		Open: func(protocol.SiteSpec, func(int)) (Site, error) { return diagnosingSite{fs}, nil }}
	ctx := startManager(t, m)
	// The site's own timeout overrides the Manager's hour.
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: Slurm, SSH: "u@h", Max: 3, ConnectTimeout: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 running", func() bool { return fs.count(batch.Running) == 3 })
	m.Placeholder(1, protocol.Register{Site: "c", Batch: "1"}, true) // placeholder 1 connects
	info := func() protocol.SiteInfo { return m.List()[0] }
	for deadline := time.Now().Add(10 * time.Second); info().State != StateDegraded; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not degraded: %+v", info())
		}
	}
	if e := info().Error; !strings.Contains(e, "without connecting to the CLS") || !strings.Contains(e, "ends: cannot reach the CLS") {
		t.Errorf("error %q: want what happened and the agent's own error", e)
	}
	// 2 and 3 cancelled, 1 (connected) kept; a stalled site submits no
	// more: 1 running is its probe.
	time.Sleep(50 * time.Millisecond)
	fs.mu.Lock()
	_, has1 := fs.jobs["1"]
	n := len(fs.jobs)
	fs.mu.Unlock()
	if !has1 || n != 1 {
		t.Errorf("placeholders left %v, want only 1 (the connected one)", fs.jobs)
	}
	m.Placeholder(2, protocol.Register{Site: "c", Batch: "4"}, true)
	eventually(t, "recovered", func() bool { return info().State == StateOK && info().Error == "" })
	eventually(t, "provisioned again", func() bool { return fs.count(batch.Running) == 3 })
}

// fakeClock is a Manager's clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// The Manager's time-based decisions follow its clock: placeholders queued
// past ThrottleAfter by the clock throttle the site at once (no waiting an
// hour), the oldest queued wait is shown by it, and a placeholder that
// starts records the queue wait it measures.
func TestManagerClock(t *testing.T) {
	fs := &fakeSite{jobs: map[string]batch.State{}}
	st := &fakeStore{ready: 10}
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, ThrottleAfter: time.Hour, Now: clock.Now,
		Open: func(protocol.SiteSpec, func(int)) (Site, error) { return fs, nil }}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Max: 4}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "4 queued", func() bool { return fs.count(batch.Queued) == 4 })
	time.Sleep(50 * time.Millisecond) // many polls: the clock has not moved, nothing throttles
	if info := m.List()[0]; info.State != StateOK || info.OldestQueuedS != 0 || fs.count(batch.Queued) != 4 {
		t.Fatalf("before the clock moved: %+v, %d queued", info, fs.count(batch.Queued))
	}
	clock.advance(2 * time.Hour)
	eventually(t, "throttled, one probe left", func() bool {
		return m.List()[0].State == StateThrottled && fs.count(batch.Queued) == 1
	})
	if got := m.List()[0].OldestQueuedS; got != 2*3600 {
		t.Errorf("oldest queued %v s, want 7200 by the clock", got)
	}
	fs.startAll()
	eventually(t, "recovered", func() bool { return m.List()[0].State == StateOK })
	if got := m.List()[0].QueueWaitS; got != 2*3600 {
		t.Errorf("queue wait %v s, want 7200 by the clock", got)
	}
}

// Placeholders that fail the same way at every try are not resubmitted at
// every poll: the site is degraded saying why and looked at less often,
// and recovers once a placeholder no longer fails so. Those that go into
// the batch system's error state (SGE's Eqw: a -wd or project the cluster
// refuses) are cancelled; those that end without ever reaching the CLS
// (an agent that refuses its --out or data root, a registration the CLS
// refuses) are gone already.
func TestFailingPlaceholdersBackOff(t *testing.T) {
	for _, tc := range []struct {
		name, says string
		fail       func(f *fakeSite, on bool)
	}{
		{"error state", "error state", func(f *fakeSite, on bool) { f.brokenAtOnce = on }},
		{"ended without connecting", "without connecting to the CLS", func(f *fakeSite, on bool) { f.exitAtOnce = on }},
		{"ran briefly without connecting", "without connecting to the CLS", func(f *fakeSite, on bool) { f.runOnce = on }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeSite{jobs: map[string]batch.State{}}
			tc.fail(fs, true)
			st := &fakeStore{}
			const poll = 5 * time.Millisecond
			m := &Manager{Store: st, Poll: poll, Open: func(protocol.SiteSpec, func(int)) (Site, error) { return fs, nil }}
			ctx := startManager(t, m)
			if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Max: 1}); err != nil {
				t.Fatal(err)
			}
			st.setReady(1)
			eventually(t, "degraded", func() bool {
				s := m.List()[0]
				return s.State == StateDegraded && strings.Contains(s.Error, tc.says)
			})
			fs.mu.Lock()
			from := fs.submitted
			fs.mu.Unlock()
			// 64 polls: at once, one submission a poll; backing off (2
			// polls, doubling to 32), a few.
			time.Sleep(64 * poll) // the window measured, not a condition awaited
			fs.mu.Lock()
			n := fs.submitted - from
			tc.fail(fs, false)
			fs.mu.Unlock()
			if n > 16 {
				t.Errorf("%d placeholders submitted in 64 polls of a site whose placeholders all fail (%s)", n, tc.name)
			}
			eventually(t, "recovered", func() bool { return m.List()[0].State == StateOK })
		})
	}
}

// The same trouble at every retry, with other placeholder ids, is logged
// as the site degraded once (it was logged at every retry).
func TestBrokenRetriesLoggedOnce(t *testing.T) {
	fs := &fakeSite{jobs: map[string]batch.State{}, brokenAtOnce: true}
	st := &fakeStore{}
	var logged syncBuffer
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, Log: slog.New(slog.NewTextHandler(&logged, nil)),
		Open: func(protocol.SiteSpec, func(int)) (Site, error) { return fs, nil }}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Max: 2}); err != nil {
		t.Fatal(err)
	}
	st.setReady(4)
	eventually(t, "three retries", func() bool {
		return strings.Count(logged.String(), "error state; cancelling them") >= 3
	})
	if n := strings.Count(logged.String(), `msg="site degraded"`); n != 1 {
		t.Errorf("the site was logged degraded %d times over three retries of one trouble, want once:\n%s", n, logged.String())
	}
	// The first step submits the two the work warrants; each retry then
	// one, a probe. (Counted before the retries, which only grow.)
	fs.mu.Lock()
	submitted := fs.submitted
	fs.mu.Unlock()
	if retries := strings.Count(logged.String(), "error state; cancelling them"); submitted > retries+2 {
		t.Errorf("%d placeholders submitted by %d retries, want at most one a retry after the first two", submitted, retries)
	}
}

// The site's error says why the batch system put a placeholder in its
// error state, asked before the cancel that removes the reason.
func TestBrokenSaysWhy(t *testing.T) {
	fs := &fakeSite{jobs: map[string]batch.State{}, brokenAtOnce: true, explain: "can't chdir to /nonexistent: No such file or directory"}
	m := &Manager{Store: &fakeStore{}, Poll: 5 * time.Millisecond, Open: func(protocol.SiteSpec, func(int)) (Site, error) { return fs, nil }}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	m.Store.(*fakeStore).setReady(1)
	eventually(t, "degraded", func() bool { return m.List()[0].State == StateDegraded })
	want := "went into the batch system's error state and were cancelled (1); it said of 1: can't chdir to /nonexistent: No such file or directory: check the site's --submit-args"
	if got := m.List()[0].Error; !strings.Contains(got, want) {
		t.Errorf("site error %q, want it to contain %q", got, want)
	}
}

// Remove reports a failed cancel, not the site's last trouble: a site
// degraded by a failed listing, removed once listing works, removes
// cleanly.
func TestRemoveNotLastTrouble(t *testing.T) {
	fs := &fakeSite{jobs: map[string]batch.State{}, listErr: errors.New("cannot reach the login host")}
	m := &Manager{Store: &fakeStore{}, Poll: time.Hour, Open: func(protocol.SiteSpec, func(int)) (Site, error) { return fs, nil }}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "degraded", func() bool { return m.List()[0].State == StateDegraded })
	fs.mu.Lock()
	fs.listErr = nil
	fs.mu.Unlock()
	info, err := m.Remove(ctx, "c")
	if err != nil || info.Error != "" {
		t.Errorf("Remove: %+v, %v; want no error (the cancel worked)", info.Error, err)
	}
}

// Remove of a site whose login host cannot be reached says that its
// placeholders could not be listed, not that they exist: a site added with
// a host not reached yet has none.
func TestRemoveUnreachable(t *testing.T) {
	fs := &fakeSite{jobs: map[string]batch.State{}, listErr: errors.New("cannot reach the login host")}
	m := &Manager{Store: &fakeStore{}, Poll: time.Hour, Open: func(protocol.SiteSpec, func(int)) (Site, error) { return fs, nil }}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	info, err := m.Remove(ctx, "c")
	want := "could not list its placeholders (cancel any it has by hand): cannot reach the login host"
	if err != nil || info.Error != want {
		t.Errorf("Remove: %q, %v; want %q", info.Error, err, want)
	}
}

// A batch system that refuses every submission (a partition that does not
// exist, an account required): the site is degraded saying what the batch
// system said, stays degraded (never shown ok) while the retries fail, is
// logged degraded once, not at every retry, and recovers once a
// submission is accepted.
func TestSubmitRefusedDegradesOnce(t *testing.T) {
	refused := errors.New("sbatch: exit status 1: sbatch: error: invalid partition specified: nosuch")
	fs := &fakeSite{jobs: map[string]batch.State{}, submitErr: refused}
	var logBuf syncBuffer
	st := &fakeStore{}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, Log: slog.New(slog.NewTextHandler(&logBuf, nil)),
		Open: func(protocol.SiteSpec, func(int)) (Site, error) { return fs, nil }}
	var mu sync.Mutex
	calls, shown := 0, map[string]int{}
	fs.onSubmit = func() {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls > 1 { // after the first refusal
			shown[m.List()[0].State]++
		}
	}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: Slurm, SSH: "u@h", Max: 2}); err != nil {
		t.Fatal(err)
	}
	st.setReady(1)
	eventually(t, "four refused submissions", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls >= 4
	})
	info := m.List()[0]
	if info.State != StateDegraded || !strings.Contains(info.Error, "invalid partition specified") {
		t.Errorf("site %s %q, want degraded with the batch system's words", info.State, info.Error)
	}
	mu.Lock()
	if len(shown) != 1 || shown[StateDegraded] == 0 {
		t.Errorf("states shown while refused submissions were retried: %v, want degraded only", shown)
	}
	mu.Unlock()
	if n := strings.Count(logBuf.String(), `msg="site degraded"`); n != 1 {
		t.Errorf("logged degraded %d times for one trouble:\n%s", n, logBuf.String())
	}
	fs.mu.Lock()
	fs.submitErr = nil
	fs.mu.Unlock()
	eventually(t, "recovered", func() bool { return m.List()[0].State == StateOK && fs.count(batch.Queued) == 1 })
	eventually(t, "recovery logged", func() bool { return strings.Count(logBuf.String(), `msg="site recovered"`) == 1 })
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPausedPlaceholders: a site counts its connected placeholders whose
// heartbeats say they take no new jobs for their full output disk; one
// that says the pause ended, or disconnects, no longer counts, and a
// placeholder of no site changes nothing.
func TestPausedPlaceholders(t *testing.T) {
	m := &Manager{Store: &fakeStore{}, Poll: time.Hour, Open: func(protocol.SiteSpec, func(int)) (Site, error) {
		return &fakeSite{jobs: map[string]batch.State{}}, nil
	}}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Max: 2}); err != nil {
		t.Fatal(err)
	}
	reg := protocol.Register{Site: "c"}
	m.Placeholder(7, reg, true)
	m.Placeholder(8, reg, true)
	for _, step := range []struct {
		do   func()
		want int
	}{
		{func() { m.Paused(7, true) }, 1},
		{func() { m.Paused(7, true); m.Paused(8, true) }, 2},
		{func() { m.Paused(8, false) }, 1},
		{func() { m.Paused(99, true) }, 1},
		{func() { m.Placeholder(7, reg, false) }, 0},
		{func() { m.Paused(7, true) }, 0}, // gone: a late heartbeat's word is not kept
	} {
		step.do()
		if got := m.List()[0].Paused; got != step.want {
			t.Fatalf("paused %d, want %d", got, step.want)
		}
	}
}
