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
