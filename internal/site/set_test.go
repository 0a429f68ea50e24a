package site

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/protocol"
)

// updStore is a fakeStore that stores changed sites.
type updStore struct{ *fakeStore }

func (updStore) UpdateSite(context.Context, protocol.SiteSpec) error { return nil }

// A site the batch system refuses (no such partition, an account needed)
// is mended in place with cls site set --queue/--submit-args: the site
// submits with the new settings and recovers, keeping its name and state.
// A queue for a local site, or one no shell word could be, is refused.
func TestSetQueueMendsRefusedSite(t *testing.T) {
	var mu sync.Mutex
	var opened []protocol.SiteSpec
	var sites []*fakeSite
	st := updStore{&fakeStore{}}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, Open: func(spec protocol.SiteSpec, _ func(int)) (Site, error) {
		fs := &fakeSite{jobs: map[string]batch.State{}}
		if spec.Queue == "nosuch" || !strings.Contains(spec.SubmitArgs, "-A ") {
			fs.submitErr = errors.New("sbatch: exit status 1: sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified")
		}
		mu.Lock()
		defer mu.Unlock()
		opened, sites = append(opened, spec), append(sites, fs)
		return fs, nil
	}}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: Slurm, SSH: "u@h", Queue: "nosuch", Max: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "here", Type: Local, Max: 1}); err != nil {
		t.Fatal(err)
	}
	st.setReady(1)
	eventually(t, "degraded", func() bool {
		s := siteInfo(m, "c")
		return s.State == StateDegraded && strings.Contains(s.Error, "Invalid account")
	})
	queue, args := "short", "-A proj"
	info, err := m.Set(ctx, protocol.SiteSet{Name: "c", Queue: &queue, SubmitArgs: &args})
	if err != nil || info.Queue != "short" || info.SubmitArgs != "-A proj" {
		t.Fatalf("Set: %+v, %v", info.SiteSpec, err)
	}
	mu.Lock()
	last := opened[len(opened)-1]
	fs := sites[len(sites)-1]
	mu.Unlock()
	if last.Queue != "short" || last.SubmitArgs != "-A proj" {
		t.Fatalf("the site was not opened again with the new queue and arguments: %+v", last)
	}
	eventually(t, "recovered, a placeholder submitted", func() bool {
		return siteInfo(m, "c").State == StateOK && fs.count(batch.Queued) == 1
	})
	for _, tc := range []struct {
		set  protocol.SiteSet
		want string
	}{
		{protocol.SiteSet{Name: "c", Queue: ptr("a b")}, `--queue "a b": not a queue name`},
		{protocol.SiteSet{Name: "c", SubmitArgs: ptr("-A 'x")}, "--submit-args"},
		{protocol.SiteSet{Name: "here", Queue: ptr("short")}, "--queue is only for remote sites"},
	} {
		_, err := m.Set(ctx, tc.set)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Set %+v: %v, want a bad request saying %q", tc.set, err, tc.want)
		}
	}
	if s := siteInfo(m, "c"); s.Queue != "short" || s.SubmitArgs != "-A proj" {
		t.Errorf("a refused change changed the site: %+v", s.SiteSpec)
	}
}

func ptr[T any](v T) *T { return &v }

// A running placeholder the batch system puts back in its queue (Slurm
// requeues a batch job whose node failed, or that was preempted or
// requeued by the admin, under the same id) is counted as queued again:
// it takes no work, so the other sites provide for it, and its wait in
// the queue counts from then. (It stayed counted as running, holding the
// other sites back while it waited.)
func TestRequeuedPlaceholderCountsQueued(t *testing.T) {
	m, c, d := oneRunningBesideIdle(t)
	c.set(func(j map[string]batch.State) { j["1"] = batch.Queued }) // requeued by the batch system
	eventually(t, "c's placeholder counted queued", func() bool {
		s := siteInfo(m, "c")
		return s.Queued == 1 && s.Running == 0
	})
	eventually(t, "d provides for the work", func() bool { return d.count(batch.Queued) == 1 })
}

// A placeholder the batch system suspends (scontrol suspend, qmod -sj, a
// load threshold) takes no work: the other sites provide for the work it
// would have taken, while it keeps its place (counted toward --max, never
// cancelled as a queued one would be). Counted as running with free
// slots, it held them back for as long as it stayed suspended.
func TestSuspendedPlaceholderTakesNoWork(t *testing.T) {
	m, c, d := oneRunningBesideIdle(t)
	c.set(func(j map[string]batch.State) { j["1"] = batch.Suspended })
	eventually(t, "d provides for the work", func() bool { return d.count(batch.Queued) == 1 })
	if s := siteInfo(m, "c"); s.Running != 1 || s.Queued != 0 || c.count(batch.Suspended) != 1 || c.count(batch.Queued) != 0 {
		t.Errorf("c with its placeholder suspended: %d running, %d queued listed; in the batch system %d suspended, %d queued", s.Running, s.Queued, c.count(batch.Suspended), c.count(batch.Queued))
	}
}

// cls site list says why the oldest queued placeholder waits, as its
// batch system says (held by the admin, a partition's time limit): a
// site that only ever waits says why instead of only how long.
func TestOldestWhy(t *testing.T) {
	fs := &fakeSite{jobs: map[string]batch.State{}, why: map[string]string{"1": "JobHeldAdmin"}}
	m := &Manager{Store: &fakeStore{ready: 1}, Poll: 5 * time.Millisecond, Open: func(protocol.SiteSpec, func(int)) (Site, error) { return fs, nil }}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: Slurm, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the held placeholder's reason", func() bool {
		s := siteInfo(m, "c")
		return s.Queued == 1 && s.OldestWhy == "JobHeldAdmin"
	})
	fs.mu.Lock()
	fs.why = nil // released
	fs.mu.Unlock()
	eventually(t, "no reason once released", func() bool { return siteInfo(m, "c").OldestWhy == "" })
}

// cls site set --queue on a site whose queued placeholders never start
// (a partition whose time limit is below --walltime takes them and keeps
// them pending): the ones queued with the old settings are cancelled and
// new ones submitted with the new, instead of waiting behind them (and,
// once throttled, behind the oldest of them as the probe) for ever.
func TestSetQueueReplacesQueued(t *testing.T) {
	fs := &fakeSite{jobs: map[string]batch.State{}}
	m := &Manager{Store: updStore{&fakeStore{ready: 1}}, Poll: 5 * time.Millisecond, Open: func(protocol.SiteSpec, func(int)) (Site, error) { return fs, nil }}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: Slurm, SSH: "u@h", Queue: "short", Max: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "one queued", func() bool { return fs.count(batch.Queued) == 1 })
	price := 1.0
	if _, err := m.Set(ctx, protocol.SiteSet{Name: "c", Price: &price}); err != nil {
		t.Fatal(err)
	}
	queue := "long"
	if _, err := m.Set(ctx, protocol.SiteSet{Name: "c", Queue: &queue}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the old one cancelled, a new one queued", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		_, old := fs.jobs["1"]
		return !old && len(fs.jobs) == 1 && fs.submitted == 2
	})
}

// A site whose submissions are refused while its placeholders run (a
// per-user job limit reached) still counts what those take: the other
// sites provide only for the rest. (Its supply was zeroed as if its
// placeholders were unknown, and the others provided for all the work.)
func TestRefusedSubmitKeepsSupply(t *testing.T) {
	c, d := &fakeSite{jobs: map[string]batch.State{}, startAtOnce: true}, &fakeSite{jobs: map[string]batch.State{}}
	st := &fakeStore{ready: 2}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, Open: func(spec protocol.SiteSpec, _ func(int)) (Site, error) {
		if spec.Name == "c" {
			return c, nil
		}
		return d, nil
	}}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: Slurm, SSH: "u@h", Max: 3}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "c's two placeholders running", func() bool { return siteInfo(m, "c").Running == 2 })
	var mu sync.Mutex
	refused := 0
	c.mu.Lock()
	c.submitErr = errors.New("sbatch: exit status 1: sbatch: error: QOSMaxSubmitJobPerUserLimit")
	c.onSubmit = func() {
		mu.Lock()
		refused++
		mu.Unlock()
	}
	c.mu.Unlock()
	st.setReady(3) // c wants a third, and is refused
	eventually(t, "c refused twice", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused >= 2
	})
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "d", Type: Slurm, SSH: "u@h", Max: 3}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "d provides for the third job", func() bool { return d.count(batch.Queued) >= 1 })
	mu.Lock()
	from := refused
	mu.Unlock()
	eventually(t, "c refused twice more", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused >= from+2
	})
	if n := d.count(batch.Queued); n != 1 {
		t.Errorf("d queued %d placeholders for the one job c's running placeholders do not take", n)
	}
}

// oneRunningBesideIdle starts a manager with one ready job and two Slurm
// sites of one placeholder each: c's placeholder running (it takes the
// job), d, added after, submitting none.
func oneRunningBesideIdle(t *testing.T) (*Manager, *fakeSite, *fakeSite) {
	t.Helper()
	c, d := &fakeSite{jobs: map[string]batch.State{}}, &fakeSite{jobs: map[string]batch.State{}}
	st := &fakeStore{ready: 1}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, Open: func(spec protocol.SiteSpec, _ func(int)) (Site, error) {
		if spec.Name == "c" {
			return c, nil
		}
		return d, nil
	}}
	ctx := startManager(t, m)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: Slurm, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "c's placeholder queued", func() bool { return c.count(batch.Queued) == 1 })
	c.startAll()
	eventually(t, "c's placeholder running", func() bool { return siteInfo(m, "c").Running == 1 })
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "d", Type: Slurm, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "d looked", func() bool { return siteInfo(m, "d").State == StateOK })
	if n := d.count(batch.Queued); n != 0 {
		t.Fatalf("d submitted %d placeholders for work c's running one takes", n)
	}
	return m, c, d
}
