package dag

import (
	"testing"

	"github.com/mq-hpc/mq/job"
)

// TestHoldRelease: a held job keeps its own state whatever its
// prerequisites do, keeps its target incomplete (dependents wait), and
// released takes the state its prerequisites give it.
func TestHoldRelease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// end is what becomes of the prerequisite job while b is held
		// (0: it stays executing).
		end  job.State
		want job.State // b's state when released
	}{
		{"prerequisite still running", 0, job.Waiting},
		{"prerequisite done", job.Done, job.Queued},
		{"prerequisite failed", job.Failed, job.Blocked},
		{"prerequisite deleted", job.Deleted, job.Blocked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := New()
			ta, tb, tc2 := g.AddTarget("a"), g.AddTarget("b"), g.AddTarget("c")
			g.AddEdges(tb, []TargetID{ta})
			g.AddEdges(tc2, []TargetID{tb})
			g.AddJob(1, Node{Target: ta})
			g.AddJob(2, Node{Target: tb, Prereqs: []TargetID{ta}})
			g.AddJob(3, Node{Target: tc2, Prereqs: []TargetID{tb}})
			if _, err := g.Set(1, job.Executing); err != nil {
				t.Fatal(err)
			}
			ch, err := g.Hold(2)
			if err != nil || len(ch) != 1 || ch[0].From != job.Waiting || ch[0].To != job.Held {
				t.Fatalf("Hold = %+v, %v", ch, err)
			}
			if _, err := g.Hold(2); err == nil {
				t.Fatal("a held job was held again")
			}
			if tc.end != 0 {
				if _, err := g.Set(1, tc.end); err != nil {
					t.Fatal(err)
				}
			}
			if g.State(2) != job.Held || g.State(3) != job.Waiting {
				t.Fatalf("held job %s, its dependent %s; want H, W", g.State(2), g.State(3))
			}
			if _, err := g.Set(2, job.Held); err == nil {
				t.Fatal("Set(Held) was taken")
			}
			if _, err := g.Release(2); err != nil {
				t.Fatal(err)
			}
			if g.State(2) != tc.want {
				t.Fatalf("released job is %s, want %s", g.State(2), tc.want)
			}
			wantDep := job.Waiting
			if tc.want == job.Blocked {
				wantDep = job.Blocked
			}
			if g.State(3) != wantDep {
				t.Fatalf("dependent is %s, want %s", g.State(3), wantDep)
			}
			if _, err := g.Release(2); err == nil {
				t.Fatal("a job not held was released")
			}
		})
	}
	t.Run("submitted held", func(t *testing.T) {
		g := New()
		ta := g.AddTarget("a")
		ch := g.AddJob(1, Node{Target: ta, State: job.Held})
		if len(ch) != 1 || ch[0].To != job.Held || g.Complete(ta) {
			t.Fatalf("AddJob held = %+v, complete %v", ch, g.Complete(ta))
		}
		if _, err := g.Release(1); err != nil || g.State(1) != job.Queued {
			t.Fatalf("Release = %v, state %s", err, g.State(1))
		}
	})
}
