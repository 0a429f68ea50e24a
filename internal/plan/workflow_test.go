package plan

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/wfformat"
)

func readTraces(t testing.TB) map[string]*wfformat.Workflow {
	dir := filepath.Join("..", "..", "..", "shared", "data", "wfinstances")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Skipf("no WfFormat traces in %s", dir)
	}
	out := map[string]*wfformat.Workflow{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		w, err := wfformat.Read(fh)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = w
	}
	return out
}

// TestRealTracesPlan: every real trace becomes a problem every planner and
// both late-binding picks can schedule; no schedule beats the critical
// path at the fastest site, and AEH-ETAA (a few iterations) is never
// worse than the heuristics it starts from.
func TestRealTracesPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pl := GenPlatform(4, 2, 10e6, 0.05, 1)
	fastest := 0.0
	for _, s := range pl.Speed {
		fastest = max(fastest, s)
	}
	for name, w := range readTraces(t) {
		p, err := FromWorkflow(w, pl)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		floor := w.CriticalPath() / fastest
		h, err := HEFT{}.Plan(ctx, p)
		if err != nil {
			t.Fatalf("%s: HEFT: %v", name, err)
		}
		mm, err := MinMin{}.Plan(ctx, p)
		if err != nil {
			t.Fatalf("%s: MinMin: %v", name, err)
		}
		a, err := AEHETAA{MaxIter: 3, SearchBudget: 32, TimeLimit: time.Minute}.Plan(ctx, p)
		if err != nil {
			t.Fatalf("%s: AEH-ETAA: %v", name, err)
		}
		for _, b := range []Binding{FirstReady, MostLocal} {
			ms, _, err := LateBinding(p, b)
			if err != nil || ms < floor*0.999 {
				t.Errorf("%s: late binding %d: makespan %v (floor %v), %v", name, b, ms, floor, err)
			}
		}
		for who, got := range map[string]float64{"heft": h.Makespan, "minmin": mm.Makespan, "aeh": a.Makespan} {
			if got < floor*0.999 {
				t.Errorf("%s: %s makespan %v below the critical path at the fastest site %v", name, who, got, floor)
			}
		}
		if a.Makespan > min(h.Makespan, mm.Makespan)+1e-6 {
			t.Errorf("%s: AEH-ETAA %v worse than HEFT %v or MinMin %v", name, a.Makespan, h.Makespan, mm.Makespan)
		}
	}
}

// TestWorkflowCores: a trace task holds its cores at its site, as a live
// plan's job does: two 4-core tasks on one 4-slot site run one after the
// other, planned or bound late. A task asking for more cores than any job may is refused, naming
// it, as the live replay refuses it.
func TestWorkflowCores(t *testing.T) {
	t.Parallel()
	pl := Platform{Sites: []policy.PlanSite{{Name: "a", Slots: 4}}, Bandwidth: 1e9}
	w := &wfformat.Workflow{Tasks: []wfformat.Task{{ID: "x", Runtime: 10, Cores: 4}, {ID: "y", Runtime: 10, Cores: 4}}}
	p, err := FromWorkflow(w, pl)
	if err != nil {
		t.Fatal(err)
	}
	h, err := HEFT{}.Plan(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if h.Makespan < 20-1e-9 {
		t.Errorf("two 4-core tasks of 10 s on 4 slots: HEFT's makespan %v, want 20", h.Makespan)
	}
	for _, b := range Bindings {
		if ms, _, err := LateBinding(p, b.Binding); err != nil || ms < 20-1e-9 {
			t.Errorf("two 4-core tasks of 10 s on 4 slots: %s's makespan %v (%v), want 20", b.Name, ms, err)
		}
	}
	if wfformat.MaxCores != resource.MaxCPUs {
		t.Errorf("a trace may ask for %d cores, a job for %d", wfformat.MaxCores, resource.MaxCPUs)
	}
	w.Tasks[1].Cores = resource.MaxCPUs + 1
	if _, err := FromWorkflow(w, pl); err == nil || !strings.Contains(err.Error(), `task "y"`) {
		t.Errorf("a task of %d cores: %v, want an error naming it", w.Tasks[1].Cores, err)
	}
}
