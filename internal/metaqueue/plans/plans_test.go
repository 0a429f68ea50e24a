package plans

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// planned is a Plans holding entries as a recorded plan leaves them:
// added in any order, then sorted per site.
func planned(entries map[int64]entry) *Plans {
	var p Plans
	p.Reset()
	ids := make([]int64, 0, len(entries))
	for id := range entries {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p.add(id, entries[id])
	}
	p.sortAll()
	return &p
}

func collect(p *Plans, site string) []int64 {
	var out []int64
	for id := range p.At(site) {
		out = append(out, id)
	}
	return out
}

// TestKeep: a job waits for its planned site only while that site was
// seen within Patience and the job has been ready for less than Patience
// plus the wait its plan predicts.
func TestKeep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		id       int64
		asking   string
		seen     time.Duration // before now that site a asked; <0: never
		ready    time.Duration // before now that the job became ready
		wait     time.Duration // the plan's predicted wait
		wantKeep bool
	}{
		{"not planned", 9, "b", 0, 0, 0, false},
		{"asked at its own site", 1, "a", 0, 0, 0, false},
		{"its site never seen", 1, "b", -1, 0, 0, false},
		{"its site silent too long", 1, "b", Patience + time.Second, 0, 0, false},
		{"its site alive, just ready", 1, "b", Patience, Patience - time.Second, 0, true},
		{"waited out patience", 1, "b", 0, Patience, 0, false},
		{"within its predicted wait", 1, "b", 0, Patience + 50*time.Second, time.Minute, true},
		{"past its predicted wait", 1, "b", 0, Patience + time.Minute, time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := planned(map[int64]entry{1: {site: "a", seq: 0, wait: tt.wait}})
			now := t0.Add(time.Hour)
			if tt.seen >= 0 {
				p.Seen("a", now.Add(-tt.seen))
			}
			p.Ready(1, job.Waiting, now.Add(-tt.ready))
			if got := p.Keep(tt.id, tt.asking, now); got != tt.wantKeep {
				t.Errorf("Keep(%d, %q) = %v, want %v", tt.id, tt.asking, got, tt.wantKeep)
			}
		})
	}
}

// TestAt: a site's planned jobs come in plan order; jobs that ended or
// were planned again elsewhere are skipped, and dropped from the front of
// the site's list; no more than Scan entries are looked at.
func TestAt(t *testing.T) {
	t.Parallel()
	p := planned(map[int64]entry{
		5: {site: "a", seq: 0}, 3: {site: "a", seq: 1}, 4: {site: "b", seq: 2}, 1: {site: "a", seq: 3}, 2: {site: "a", seq: 4},
	})
	if got, want := collect(p, "a"), []int64{5, 3, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("At(a) = %v, want %v", got, want)
	}
	p.Ended(5)
	p.add(1, entry{site: "b", seq: 5}) // planned again elsewhere
	if got, want := collect(p, "a"), []int64{3, 2}; !slices.Equal(got, want) {
		t.Fatalf("after an end and a move, At(a) = %v, want %v", got, want)
	}
	if got, want := p.bySite["a"], []int64{3, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("a's list is %v, want the ended front dropped: %v", got, want)
	}
	for id := range p.At("a") {
		if id != 3 {
			t.Fatalf("At(a) went on past a stop, to %d", id)
		}
		break
	}
	if got := collect(p, "nosuch"); len(got) != 0 {
		t.Fatalf("At(nosuch) = %v", got)
	}

	many := map[int64]entry{}
	for id := int64(1); id <= Scan+10; id++ {
		many[id] = entry{site: "a", seq: id}
	}
	p = planned(many)
	p.Ended(2)
	if got := collect(p, "a"); len(got) != Scan-1 || got[0] != 1 || got[len(got)-1] != Scan {
		t.Fatalf("At(a) over %d entries gave %d (%d..%d), want the first %d entries less the ended one", Scan+10, len(got), got[0], got[len(got)-1], Scan)
	}
}

// TestActiveReadyEnded: Ready marks only planned jobs; an ended job's plan
// is forgotten; Active says whether any is left, and Reset forgets all.
func TestActiveReadyEnded(t *testing.T) {
	t.Parallel()
	var p Plans
	p.Reset()
	if p.Active() {
		t.Fatal("a fresh Plans is active")
	}
	p.Ended(1) // nothing planned: nothing to do
	p = *planned(map[int64]entry{1: {site: "a"}})
	p.Ready(1, job.Waiting, t0)
	p.Ready(2, job.Waiting, t0)
	if _, ok := p.readyAt[2]; ok || p.readyAt[1] != t0 || !p.Active() {
		t.Fatalf("readyAt %v, active %v; want only job 1 ready at t0", p.readyAt, p.Active())
	}
	p.Ended(1)
	if _, ok := p.readyAt[1]; ok || p.Active() {
		t.Fatalf("after its end, job 1 still has readyAt %v or the plans are active", p.readyAt)
	}
	p.fileSite["x"] = "a"
	if site, ok := p.FileSite("x"); !ok || site != "a" {
		t.Fatalf("FileSite(x) = %q, %v", site, ok)
	}
	p.Reset()
	if _, ok := p.FileSite("x"); ok {
		t.Fatal("Reset kept a file's site")
	}
}

// TestCheck: a plan without its planner's name, or ordering a job it
// places nowhere, is a bad request, refused before anything is written.
func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rec  Record
		pl   policy.Plan
		ok   bool
	}{
		{"fine", Record{Planner: "heft"}, policy.Plan{Order: []int64{1}, Site: map[int64]string{1: "a"}}, true},
		{"empty", Record{Planner: "heft"}, policy.Plan{}, true},
		{"no planner", Record{}, policy.Plan{}, false},
		{"placed nowhere", Record{Planner: "heft"}, policy.Plan{Order: []int64{1, 2}, Site: map[int64]string{1: "a"}}, false},
		{"placed at no name", Record{Planner: "heft"}, policy.Plan{Order: []int64{1}, Site: map[int64]string{1: ""}}, false},
	}
	for _, tt := range tests {
		err := Check(tt.rec, tt.pl)
		var pe *protocol.Error
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: Check = %v", tt.name, err)
		case !tt.ok && (!errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest):
			t.Errorf("%s: Check = %v, want a bad request", tt.name, err)
		}
	}
}

func TestWaitOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   float64
		want time.Duration
	}{{-5, 0}, {0, 0}, {1.5, 1500 * time.Millisecond}, {86400, 24 * time.Hour}, {1e9, 24 * time.Hour}} {
		if got := waitOf(tt.in); got != tt.want {
			t.Errorf("waitOf(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestQueriesUsed: every query of plans.sql is used by the package and
// every query it uses is in the file (Get panics on an unknown name only
// when the code runs).
func TestQueriesUsed(t *testing.T) {
	t.Parallel()
	modtest.QueriesUsed(t, "plans.sql", queries.Names(), regexp.MustCompile(`(?:Get\(|\[\]string\{|, )"([A-Z][A-Za-z]+)"`))
}

// TestSeenBounded: sites seen under endless names, each once, leave a
// bounded number behind; one seen within Patience still keeps its jobs.
func TestSeenBounded(t *testing.T) {
	t.Parallel()
	p := planned(map[int64]entry{1: {site: "a"}})
	now := t0
	for i := range 20_000 {
		now = now.Add(time.Second)
		p.Seen(fmt.Sprintf("name%d", i), now)
		if i%10 == 0 {
			p.Seen("a", now)
		}
	}
	if n := len(p.lastSeen); n > 2*max(minSeenPrune, int(Patience/time.Second)+2) {
		t.Errorf("%d sites remembered after 20,000 names, one a second", n)
	}
	p.Ready(1, job.Waiting, now)
	if !p.Keep(1, "b", now) {
		t.Errorf("a site seen within Patience was forgotten")
	}
}
