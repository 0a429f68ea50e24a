package sim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A job longer than the horizon is refused at once, naming it: the idle
// placeholders' turns would otherwise take billions of events (a trace
// with a runtime of 1e15 s ran for an hour) before the horizon check.
func TestHorizonRefusesLongJob(t *testing.T) {
	t.Parallel()
	for _, rt := range []string{"1e15", "1e300"} {
		w := mustWorkload(t, `{"jobs":[{"name":"a","runtime_s":1},{"name":"long","runtime_s":`+rt+`,"after":["a"]}]}`)
		start := time.Now()
		_, err := Run(w, LAN, Config{Policy: "fcfs", Placeholders: 2, Seed: 1})
		if err == nil || !strings.Contains(err.Error(), `job "long" runs`) || !strings.Contains(err.Error(), "horizon") {
			t.Errorf("runtime %s: err %v, want the job named past the horizon", rt, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("runtime %s: refused after %v", rt, d)
		}
	}
}

// RunContext ends with the context's error: Ctrl-C on mqsim must stop a
// run of a long virtual time (the sweep waited for it to finish).
func TestRunContextCancelled(t *testing.T) {
	t.Parallel()
	// One job of 10^6 s: millions of events of idle placeholders asking.
	w := mustWorkload(t, `{"jobs":[{"name":"long","runtime_s":1e6}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, pol := range []string{"fcfs", "dc"} {
		if _, err := RunContext(ctx, w, LAN, Config{Policy: pol, Placeholders: 8, Seed: 1}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err %v, want context.Canceled", pol, err)
		}
	}
	s := Sweep{Policies: []string{"fcfs"}, Placeholders: []int{8}, Inflations: []float64{1}, Networks: []Platform{LAN}, Seeds: []uint64{1},
		Workload: func(uint64) (*Workload, error) { return w, nil }}
	if err := s.Run(ctx, 1, func(Outcome) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("sweep: err %v, want context.Canceled", err)
	}
}

// A file whose one copy outlasts the horizon is refused as a job is; so is
// a platform on which a placeholder's turn takes no time (idle
// placeholders asked without end at one virtual instant: mqsim hung).
func TestHorizonRefusesHugeFileAndTimelessPlatform(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := mustWorkload(t, `{"files":[{"name":"big","bytes":1000000000000000000}],"jobs":[{"name":"a","runtime_s":1,"in":["big"]}]}`)
	if _, err := RunContext(ctx, w, LAN, Config{Policy: "fcfs", Placeholders: 2, Seed: 1}); err == nil || !strings.Contains(err.Error(), `file "big"`) || !strings.Contains(err.Error(), "horizon") {
		t.Errorf("huge file: err %v, want the file named past the horizon", err)
	}
	timeless := LAN
	timeless.Name, timeless.CLSInvocation, timeless.QueuingDelay, timeless.OtherJob = "timeless", 0, 0, 0
	idle := mustWorkload(t, `{"jobs":[{"name":"a","runtime_s":5},{"name":"b","runtime_s":1,"after":["a"]}]}`)
	if _, err := RunContext(ctx, idle, timeless, Config{Policy: "fcfs", Placeholders: 2, Seed: 1}); err == nil || !strings.Contains(err.Error(), "other_job_s must be at least") {
		t.Errorf("timeless platform: err %v, want it refused", err)
	}
	if _, err := ReadPlatform(strings.NewReader(`{"cls_invocation_s":0,"queuing_delay_s":0,"other_job_s":0}`)); err == nil {
		t.Error("ReadPlatform took a timeless platform")
	}
}

// Phases are submitted in order whatever their numbers: a workload
// naming phase 2,000,000,000 ran mqsim out of memory (a slot was made
// for every phase number up to it).
func TestSparsePhases(t *testing.T) {
	t.Parallel()
	w := mustWorkload(t, `{"jobs":[{"name":"late","runtime_s":1,"phase":2000000000},{"name":"b","runtime_s":2,"phase":3},{"name":"c","runtime_s":1,"phase":7,"after":["b"]}]}`)
	m, err := newModel(w, quiet, Config{Policy: "fcfs", Placeholders: 1, Seed: 1})
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
	if strings.Join(order, ",") != "b,c,late" {
		t.Errorf("order %v, want phases 3, 7, 2000000000 in turn", order)
	}
}

// A negative task count is an error, not silently 1.
func TestWorkloadNegativeTasks(t *testing.T) {
	t.Parallel()
	if _, err := ReadWorkload(strings.NewReader(`{"jobs":[{"name":"a","runtime_s":1,"tasks":-3}]}`)); err == nil || !strings.Contains(err.Error(), "tasks -3") {
		t.Errorf("err %v, want tasks -3 refused", err)
	}
}
