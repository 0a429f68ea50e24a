package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/wfformat"
	"github.com/mq-hpc/mq/internal/wfreplay"
	"github.com/mq-hpc/mq/protocol"
)

// agreeTrace is a DAG of the shapes the real traces have (a split, a
// level of equal and unequal tasks, a merge, a second chain), with ties
// and tasks of no runtime, and no files: a policy's order over it
// depends on the decision alone.
func agreeTrace(t *testing.T) *wfformat.Workflow {
	t.Helper()
	type task struct {
		id, name string
		rt       float64
		parents  []string
	}
	tasks := []task{
		{"split", "split", 2, nil},
		{"other", "other", 30, nil},
		{"a1", "align", 5, []string{"split"}},
		{"a2", "align", 3, []string{"split"}},
		{"a3", "align", 5, []string{"split"}},
		{"a4", "align", 0, []string{"split"}},
		{"a5", "align", 8, []string{"split"}},
		{"z1", "zero", 0, []string{"split"}},
		{"z2", "zero", 0, []string{"z1"}},
		{"long", "long", 1, []string{"a5"}},
		{"longer", "long", 20, []string{"long"}},
		{"merge", "merge", 1, []string{"a1", "a2", "a3", "a4", "a5"}},
		{"o2", "other", 4, []string{"other"}},
		{"p1", "post", 3, []string{"split"}},
		{"p2", "post", 0, []string{"p1"}}, // after a "post" task ended
		{"p3", "post", 6, []string{"p1"}},
		{"final", "final", 0.5, []string{"merge", "longer", "o2", "z2", "p2", "p3"}},
	}
	var spec, exec []string
	for _, tk := range tasks {
		ps := `[]`
		if len(tk.parents) > 0 {
			ps = `["` + strings.Join(tk.parents, `","`) + `"]`
		}
		spec = append(spec, fmt.Sprintf(`{"id":%q,"name":%q,"parents":%s}`, tk.id, tk.name, ps))
		exec = append(exec, fmt.Sprintf(`{"id":%q,"runtimeInSeconds":%g}`, tk.id, tk.rt))
	}
	doc := `{"schemaVersion":"1.5","name":"agree","workflow":{"specification":{"tasks":[` + strings.Join(spec, ",") +
		`]},"execution":{"tasks":[` + strings.Join(exec, ",") + `]}}}`
	tr, err := wfformat.Read(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// simOrder is the order the simulator starts tr's jobs in with one
// placeholder.
func simOrder(t *testing.T, tr *wfformat.Workflow, pol, staging string) []string {
	t.Helper()
	w, err := TraceWorkload(tr)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newModel(w, LAN, Config{Policy: pol, Placeholders: 1, Seed: 1, Staging: staging})
	if err != nil {
		t.Fatal(err)
	}
	var started []int32
	m.started = &started
	if _, err := m.simulate(context.Background()); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, j := range started {
		order = append(order, w.Jobs[j].Name)
	}
	return order
}

// vclock is a settable clock for the live store.
type vclock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *vclock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *vclock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// liveOrder is the order a live CLS (the metaqueue, on a virtual clock)
// hands tr's replay jobs (mqsub --wfformat's, estimates declared) to one
// placeholder of one slot that runs each for its runtime.
func liveOrder(t *testing.T, tr *wfformat.Workflow, pol string) []string {
	t.Helper()
	ctx := context.Background()
	clk := &vclock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	s, err := metaqueue.Open(ctx, metaqueue.Options{Path: filepath.Join(t.TempDir(), "mq.db"), Sync: metaqueue.SyncNormal,
		Lease: 1000 * time.Hour, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SetQueue(ctx, protocol.QueueSet{Name: protocol.DefaultQueue, Policy: &pol}); err != nil {
		t.Fatal(err)
	}
	r, err := wfreplay.New(tr, wfreplay.Options{TimeScale: 1, Est: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, r.Jobs); err != nil {
		t.Fatal(err)
	}
	reg, err := s.Register(ctx, protocol.Register{Site: "local", Host: "h", PID: 1, Slots: 1, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	runtime := map[string]float64{}
	for _, task := range tr.Tasks {
		runtime[task.ID] = task.Runtime
	}
	var order []string
	for len(order) <= len(tr.Tasks) {
		rep, err := s.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Jobs) == 0 {
			break
		}
		a := rep.Jobs[0]
		order = append(order, a.Target)
		clk.Advance(time.Duration(runtime[a.Target] * float64(time.Second)))
		if err := s.Report(ctx, reg.ID, []protocol.Report{{ID: a.ID, Attempt: a.Attempt, Exit: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	return order
}

// TestLiveSimOrderAgree: the live CLS and mqsim share the dispatch
// decision, so the same trace, one placeholder of one slot and the same
// policy give the same job order in both (DC against live staging, whose
// queue time counts from readiness as the CLS's does).
func TestLiveSimOrderAgree(t *testing.T) {
	t.Parallel()
	tr := agreeTrace(t)
	for _, tc := range []struct{ pol, staging string }{
		{"fcfs", StagingInline}, {"sjf", StagingInline}, {"cp", StagingInline},
		{"fcfs", StagingLive}, {"sjf", StagingLive}, {"cp", StagingLive}, {"dc", StagingLive},
	} {
		t.Run(tc.pol+"/"+tc.staging, func(t *testing.T) {
			live, sim := liveOrder(t, tr, tc.pol), simOrder(t, tr, tc.pol, tc.staging)
			if len(live) != len(tr.Tasks) || !slices.Equal(live, sim) {
				t.Errorf("orders differ:\nlive %v\nsim  %v", live, sim)
			}
		})
	}
}

// TestLiveSimOrderAgreeRealTraces: the same on real traces (montage's
// has tasks of no runtime), the ordered policies with the thesis's
// staging, which moves inputs within the turn and so leaves the order
// to the policy as the replay without files does.
func TestLiveSimOrderAgreeRealTraces(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"srasearch-chameleon-10a-001.json", "montage-chameleon-dss-075d-001.json", "epigenomics-chameleon-hep-1seq-100k-001.json"} {
		f, err := os.Open(filepath.Join("..", "..", "..", "shared", "data", "wfinstances", name))
		if err != nil {
			t.Skipf("no trace: %v", err)
		}
		tr, err := wfformat.Read(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, pol := range []string{"fcfs", "sjf", "cp"} {
			t.Run(name+"/"+pol, func(t *testing.T) {
				live, sim := liveOrder(t, tr, pol), simOrder(t, tr, pol, StagingInline)
				if len(live) != len(tr.Tasks) || !slices.Equal(live, sim) {
					t.Errorf("orders differ:\nlive %v\nsim  %v", live, sim)
				}
			})
		}
	}
}
