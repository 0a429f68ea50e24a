package metaqueue

import (
	"context"
	"testing"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestRegisterHandsBackUnheld: a placeholder that registers again with
// its id lists what it holds; its executing attempts it does not list
// (their replies were lost unread) go back to the queue as returned
// unstarted, the attempt not counted. A registration that lists nothing
// (null: an older agent) or that does not reclaim the id hands nothing
// back.
func TestRegisterHandsBackUnheld(t *testing.T) {
	for _, tc := range []struct {
		name    string
		host    string // registering again from; "" the same
		holding func(a []protocol.Assignment) []protocol.JobRef
		back    []int // indexes of the jobs handed back
	}{
		{name: "holds one", holding: func(a []protocol.Assignment) []protocol.JobRef {
			return []protocol.JobRef{{ID: a[0].ID, Attempt: a[0].Attempt}}
		}, back: []int{1, 2}},
		{name: "holds all", holding: func(a []protocol.Assignment) []protocol.JobRef {
			var refs []protocol.JobRef
			for _, x := range a {
				refs = append(refs, protocol.JobRef{ID: x.ID, Attempt: x.Attempt})
			}
			return refs
		}},
		{name: "holds none", holding: func([]protocol.Assignment) []protocol.JobRef { return []protocol.JobRef{} }, back: []int{0, 1, 2}},
		{name: "an older attempt only", holding: func(a []protocol.Assignment) []protocol.JobRef {
			return []protocol.JobRef{{ID: a[0].ID, Attempt: a[0].Attempt + 1}}
		}, back: []int{0, 1, 2}},
		{name: "not known", holding: func([]protocol.Assignment) []protocol.JobRef { return nil }},
		{name: "another host", host: "elsewhere", holding: func([]protocol.Assignment) []protocol.JobRef { return []protocol.JobRef{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.submit(spec("t", "true"), spec("t", "true"), spec("t", "true"))
			ph := e.register("s")
			got := e.next(ph, 3)
			if len(got) != 3 {
				t.Fatalf("got %d jobs, want 3", len(got))
			}
			host := tc.host
			if host == "" {
				host = "h-s"
			}
			r, err := e.s.Register(context.Background(), protocol.Register{ID: ph, Site: "s", Host: host, PID: 43, Slots: 4, OutDir: "/out/s", Holding: tc.holding(got)})
			if err != nil {
				t.Fatal(err)
			}
			if tc.host == "" && r.ID != ph {
				t.Fatalf("registered as %d, want %d again", r.ID, ph)
			}
			back := map[int64]bool{}
			for _, i := range tc.back {
				back[got[i].ID] = true
			}
			for _, a := range got {
				d := e.job(a.ID)
				if !back[a.ID] {
					if d.State != job.Executing.String() || len(d.Unstarted) != 0 {
						t.Errorf("job %d: %s, unstarted %+v; want it executing still", a.ID, d.State, d.Unstarted)
					}
					continue
				}
				if d.State != job.Queued.String() || len(d.History) != 0 || len(d.Unstarted) != 1 || d.Unstarted[0].Reason != ReasonHandedBack {
					t.Errorf("job %d: %s, history %+v, unstarted %+v; want it queued, handed back unstarted", a.ID, d.State, d.History, d.Unstarted)
				}
			}
			e.check()
		})
	}
}

func TestRegisterHoldingBound(t *testing.T) {
	e := newEnv(t)
	_, err := e.s.Register(context.Background(), protocol.Register{ID: 1, Site: "s", Host: "h", Slots: 1, Holding: make([]protocol.JobRef, protocol.MaxHolding+1)})
	errCode(t, err, protocol.CodeBadRequest)
}
