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
	"time"

	"github.com/mq-hpc/mq/client"
	replay "github.com/mq-hpc/mq/internal/wfreplay"
	"github.com/mq-hpc/mq/protocol"
	"github.com/mq-hpc/mq/wfformat"
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
// them; without, every job counts 1 s). Prints one line per trace and
// policy: the makespan, the bound and their ratio.
func wfreplay(args []string) error {
	fs := flag.NewFlagSet("wfreplay", flag.ExitOnError)
	slots := fs.Int("slots", 8, "slots the CLS runs jobs on (for the bound)")
	bound := fs.Duration("bound", 10*time.Second, "scale each trace so its lower bound lasts this long")
	poll := fs.Duration("poll", 20*time.Millisecond, "summary poll interval")
	policies := fs.String("policy", "", "comma list of queue policies to replay each trace under (default: leave the queue as it is)")
	est := fs.Bool("est", false, "declare each job's scaled runtime as its estimate")
	fs.Parse(args)
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
			if err := replayOnce(ctx, cl, w, path, run, pol, scale, *est, *slots, *bound, *poll); err != nil {
				return err
			}
			run++
		}
	}
	return nil
}

// replayOnce submits one trace and waits for it to finish.
func replayOnce(ctx context.Context, cl *client.Client, w *wfformat.Workflow, path string, k int, pol string, scale float64, est bool, slots int, bound, poll time.Duration) error {
	jobs, err := os.CreateTemp("", "wfreplay-*.jsonl")
	if err != nil {
		return err
	}
	defer os.Remove(jobs.Name())
	r, err := replay.New(w, replay.Options{TimeScale: scale, TargetPrefix: "wf" + strconv.Itoa(k) + "-", Est: est})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := replay.WriteJSONL(jobs, r.Jobs); err != nil {
		return err
	}
	jobs.Close()
	c0, err := summary(ctx, cl)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := runQuiet([]string{"mqsub", "-f", jobs.Name()}); err != nil {
		return err
	}
	if err := waitDone(ctx, cl, c0, len(w.Tasks), poll); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	el := time.Since(t0).Seconds()
	if pol == "" {
		pol = "-"
	}
	fmt.Printf("trace=%s policy=%s est=%v tasks=%d scale=%.4g critical_path_s=%.3f work_per_slot_s=%.3f bound_s=%.3f makespan_s=%.3f ratio=%.3f\n",
		strings.TrimSuffix(filepath.Base(path), ".json"), pol, est, len(w.Tasks), scale, w.CriticalPath()*scale,
		w.Work()*scale/float64(slots), bound.Seconds(), el, el/bound.Seconds())
	return nil
}
