package site

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/protocol"
)

// reachingStore records when the manager said each site was reached.
type reachingStore struct {
	*fakeStore
	mu      sync.Mutex
	reached map[string][]time.Time
	lost    map[string]int
	// pending: the sites told pending, each with how many listings it
	// had been told of then.
	pending map[string]int
}

func (s *reachingStore) SitePending(_ context.Context, site string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[string]int{}
	}
	s.pending[site] = len(s.reached[site]) + s.lost[site]
	return nil
}

func (s *reachingStore) SiteReached(_ context.Context, site string, at, _ time.Time, ok bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		s.reached[site] = append(s.reached[site], at)
	} else {
		s.lost[site]++
	}
	return nil
}

func (s *reachingStore) losses(site string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost[site]
}

func (s *reachingStore) times(site string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.reached[site]...)
}

// TestSiteReached: the manager tells the store a remote site is pending
// before it first lists it, then that it was reached
// each time it lists its batch system, from before it asked, and lost
// each time listing fails (the site may be cut off: its placeholders'
// leases are then held); never either for a local site, which no network
// cuts off.
func TestSiteReached(t *testing.T) {
	remote, local := &fakeSite{jobs: map[string]batch.State{}}, &fakeSite{jobs: map[string]batch.State{}}
	st := &reachingStore{fakeStore: &fakeStore{ready: 1}, reached: map[string][]time.Time{}, lost: map[string]int{}}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond,
		Open: func(spec protocol.SiteSpec, _ func(int)) (Site, error) {
			if spec.Type == Local {
				return local, nil
			}
			return remote, nil
		}}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "far", Type: SGE, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "l", Type: Local, Max: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "far reached", func() bool { return len(st.times("far")) > 0 })
	eventually(t, "the local site listed", func() bool { return listed(local) > 2 })
	if got := st.times("l"); len(got) > 0 || st.losses("l") > 0 {
		t.Errorf("a local site was told reached %v, lost %d times", got, st.losses("l"))
	}
	// Before its first listing, the remote site is pending: its
	// placeholders' leases, from an earlier CLS, wait for it.
	st.mu.Lock()
	told, pendingFar := st.pending["far"]
	_, pendingLocal := st.pending["l"]
	st.mu.Unlock()
	if !pendingFar || told != 0 || pendingLocal {
		t.Errorf("pending: far %v (after %d listings), local %v; want far only, before its first listing", pendingFar, told, pendingLocal)
	}

	cut := time.Now()
	remote.mu.Lock()
	remote.listErr = errors.New("ssh: connect to host h port 22: Connection timed out")
	remote.mu.Unlock()
	n := listed(remote)
	eventually(t, "listing far failed thrice", func() bool { return listed(remote) > n+3 && st.losses("far") >= 3 })
	for _, at := range st.times("far") {
		if !at.Before(cut) {
			t.Fatalf("far told reached at %v, after listing it failed from %v", at, cut)
		}
	}
	// A listing the login host ran and that failed is an answer.
	answeredAt := time.Now()
	remote.mu.Lock()
	remote.listErr = answered{errors.New("squeue: exit status 1: slurm_load_jobs error")}
	remote.mu.Unlock()
	lost := st.losses("far")
	eventually(t, "a failed listing told as an answer", func() bool {
		ts := st.times("far")
		return ts[len(ts)-1].After(answeredAt)
	})
	if got := st.losses("far"); got > lost+1 { // one listing may have been under way
		t.Errorf("listings that failed on the login host told as losses: %d more", got-lost)
	}
	remote.mu.Lock()
	remote.listErr = errors.New("ssh: connect to host h port 22: Connection timed out")
	remote.mu.Unlock()
	n = listed(remote)
	eventually(t, "listing far failed again", func() bool { return listed(remote) > n+3 })
	cut = time.Now()
	remote.mu.Lock()
	remote.listErr = nil
	remote.mu.Unlock()
	eventually(t, "far reached again", func() bool {
		ts := st.times("far")
		return ts[len(ts)-1].After(cut)
	})
}

func listed(f *fakeSite) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// TestListsAfterPlaceholderGone: a site with no work and no placeholder
// is listed seldom (every 30 s), but for a while after a placeholder
// disconnected it is listed at every poll: that placeholder's jobs are
// requeued once a listing answers after their leases lapsed.
func TestListsAfterPlaceholderGone(t *testing.T) {
	remote := &fakeSite{jobs: map[string]batch.State{}}
	st := &reachingStore{fakeStore: &fakeStore{}, reached: map[string][]time.Time{}, lost: map[string]int{}}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, Open: func(protocol.SiteSpec, func(int)) (Site, error) { return remote, nil }}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "far", Type: SGE, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "far listed once", func() bool { return listed(remote) > 0 })
	reg := protocol.Register{Site: "far", Host: "n1"}
	m.Placeholder(7, reg, true)
	m.Placeholder(7, reg, false)
	n := listed(remote)
	eventually(t, "far listed at every poll after its placeholder left", func() bool { return listed(remote) > n+5 })
}

// listRunner is a login host whose listing answers as run says, after the
// site is prepared on this host (shRunner).
type listRunner struct {
	shRunner
	list func() ([]byte, error)
}

func (r *listRunner) Run(ctx context.Context, cmd string) ([]byte, error) {
	if strings.Contains(cmd, "squeue") {
		return r.list()
	}
	return r.shRunner.Run(ctx, cmd)
}

// TestListAnswered: a listing the login host ran and that failed, or
// printed what cannot be read, is an answer (the site is reached: a user
// of the cluster who makes our listing fail must not hold our dead
// placeholders' leases); a connection lost, or no answer in time, is not.
func TestListAnswered(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "mqagent")
	os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o755)
	for _, tc := range []struct {
		name     string
		list     func() ([]byte, error)
		answered bool
	}{
		{"exit status", func() ([]byte, error) { return nil, errors.New("squeue: exit status 1: slurm_load_jobs error") }, true},
		{"unreadable", func() ([]byte, error) { return []byte("not a listing\n"), nil }, true},
		{"connection lost", func() ([]byte, error) { return nil, &login.ConnError{Err: io.EOF} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			spec := protocol.SiteSpec{Name: "s", Type: Slurm, SSH: "u@h"}
			if err := Validate(&spec); err != nil {
				t.Fatal(err)
			}
			r := &Remote{Spec: spec, Batch: ForType(spec.Type), CLSAddr: "127.0.0.1:1", JobName: "mq-s-x", Dir: ".mq-sites/x",
				Agent: func(string, string) (string, error) { return agent, nil },
				Dial:  func(context.Context) (login.Runner, error) { return &listRunner{shRunner{home}, tc.list}, nil },
			}
			_, err := r.List(context.Background())
			if err == nil {
				t.Fatal("the listing did not fail")
			}
			if got := errors.As(err, new(answered)); got != tc.answered {
				t.Errorf("%v: answered %v, want %v", err, got, tc.answered)
			}
		})
	}
}
