package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/wfformat"
	replay "github.com/mq-hpc/mq/internal/wfreplay"
	"github.com/mq-hpc/mq/protocol"
)

// wfreplay replays real workflow traces (WfFormat) through a running CLS:
// every task becomes a job `sleep RUNTIME*SCALE` in a target of its own,
// needing its parents' targets (internal/wfreplay, without files),
// submitted with one `mqsub -f`; the clock
// runs from the submit to the last job Done. The scale is chosen per trace
// so that its lower bound on -slots slots, max(critical path, work/slots),
// lasts -bound. With -policy, the default queue is set to each listed
// policy in turn and the trace replayed under each (same run: an A/B);
// -est declares each job's scaled runtime as its estimate (cp ranks by
// them; without, every job counts 1 s). With -planner, every root task
// waits for a gate job and a last job needs every leaf; once all are
// queued, `cls plan make` plans the last job's target with that planner
// (declared estimates only), the gate opens, and the clock runs from its
// opening to the last task Done: the CLS follows the plan's order
// (list: plan.SearchList's best priority list). -gate does the same
// without a plan, to compare like with like (submit and planning time
// left out of both). Prints one line per trace and policy: the makespan,
// the bound and their ratio, and the load average.
func wfreplay(args []string) error {
	fs := flag.NewFlagSet("wfreplay", flag.ExitOnError)
	slots := fs.Int("slots", 8, "slots the CLS runs jobs on (for the bound)")
	bound := fs.Duration("bound", 10*time.Second, "scale each trace so its lower bound lasts this long")
	poll := fs.Duration("poll", 20*time.Millisecond, "summary poll interval")
	policies := fs.String("policy", "", "comma list of queue policies to replay each trace under (default: leave the queue as it is)")
	est := fs.Bool("est", false, "declare each job's scaled runtime as its estimate")
	planner := fs.String("planner", "", "plan each trace with this planner (cls plan make) before it runs; implies -gate and -est")
	planTime := fs.Duration("plan-time", 30*time.Second, "the planner's time limit")
	gate := fs.Bool("gate", false, "hold the roots behind a gate job until every job is queued, and time from its opening")
	fs.Parse(args)
	if *planner != "" {
		*gate, *est = true, true
	}
	if fs.NArg() == 0 {
		return errors.New("need WfFormat trace files")
	}
	ctx := context.Background()
	cl, err := dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	pols := []string{""}
	if *policies != "" {
		pols = strings.Split(*policies, ",")
	}
	run := 0
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		w, err := wfformat.Read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		lb := w.LowerBound(*slots)
		if lb <= 0 {
			return fmt.Errorf("%s: lower bound is 0 (every runtime is 0)", path)
		}
		scale := bound.Seconds() / lb
		for _, pol := range pols {
			if pol != "" {
				if _, err := client.Do(ctx, cl, protocol.OpQueueSet, protocol.QueueSet{Name: protocol.DefaultQueue, Policy: &pol}); err != nil {
					return fmt.Errorf("set the default queue's policy to %s: %w", pol, err)
				}
			}
			o := replayOpts{pol: pol, scale: scale, est: *est, slots: *slots, bound: *bound, poll: *poll, gate: *gate, planner: *planner, planTime: *planTime}
			if err := replayOnce(ctx, cl, w, path, run, o); err != nil {
				return err
			}
			run++
		}
	}
	return nil
}

type replayOpts struct {
	pol         string
	scale       float64
	est         bool
	slots       int
	bound, poll time.Duration
	gate        bool
	planner     string
	planTime    time.Duration
}

// replayOnce submits one trace and waits for it to finish.
func replayOnce(ctx context.Context, cl *client.Client, w *wfformat.Workflow, path string, k int, o replayOpts) error {
	dir, err := os.MkdirTemp("", "wfreplay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	prefix := "wf" + strconv.Itoa(k) + "-"
	r, err := replay.New(w, replay.Options{TimeScale: o.scale, TargetPrefix: prefix, Est: o.est})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	jobs := r.Jobs
	gateFile := filepath.Join(dir, "gate")
	end := prefix + "end"
	if o.gate {
		// The gate job blocks reading a FIFO until the replay opens and
		// closes it: no polling, and it ends at once.
		if err := syscall.Mkfifo(gateFile, 0o600); err != nil {
			return err
		}
		gate := protocol.JobSpec{Target: prefix + "gate", Command: "cat " + gateFile + " > /dev/null", Est: 0.001}
		for i := range jobs {
			if len(jobs[i].Prereqs) == 0 {
				jobs[i].Prereqs = []string{gate.Target}
			}
		}
		jobs = append([]protocol.JobSpec{gate}, jobs...)
		jobs = append(jobs, protocol.JobSpec{Target: end, Prereqs: r.Leaves, Command: "true", Est: 0.001})
	}
	jf := filepath.Join(dir, "jobs.jsonl")
	f, err := os.Create(jf)
	if err != nil {
		return err
	}
	if err := replay.WriteJSONL(f, jobs); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	c0, err := summary(ctx, cl)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := runQuiet([]string{"mqsub", "-f", jf}); err != nil {
		return err
	}
	planned := ""
	if o.gate {
		if o.planner != "" {
			s, err := client.Do(ctx, cl, protocol.OpPlanMake, protocol.PlanMake{Target: end, Planner: o.planner,
				TimeLimitS: o.planTime.Seconds(), NoLearn: true})
			if err != nil {
				return fmt.Errorf("%s: plan: %w", path, err)
			}
			planned = fmt.Sprintf(" planned_s=%.3f planning_s=%.1f", s.MakespanS, s.PlanningS)
		}
		// Opening the FIFO for writing waits for the gate job to open it
		// for reading (it may not have started yet).
		g, err := os.OpenFile(gateFile, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		t0 = time.Now()
		g.Close()
		c0.byState["D"]++ // the gate
	}
	if err := waitDone(ctx, cl, c0, len(w.Tasks), o.poll); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	el := time.Since(t0).Seconds()
	if o.gate {
		c0.byState["D"] += len(w.Tasks)
		if err := waitDone(ctx, cl, c0, 1, o.poll); err != nil { // the last job
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	pol := o.pol
	if pol == "" {
		pol = "-"
	}
	if o.planner != "" {
		pol += "+plan:" + o.planner
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("trace=%s policy=%s est=%v gate=%v tasks=%d scale=%.4g critical_path_s=%.3f work_per_slot_s=%.3f bound_s=%.3f makespan_s=%.3f ratio=%.3f%s load=%s\n",
		strings.TrimSuffix(filepath.Base(path), ".json"), pol, o.est, o.gate, len(w.Tasks), o.scale, w.CriticalPath()*o.scale,
		w.Work()*o.scale/float64(o.slots), o.bound.Seconds(), el, el/o.bound.Seconds(), planned, strings.Fields(string(load) + " -")[0])
	return nil
}
