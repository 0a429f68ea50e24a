package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// hops measures the dependency hop: a dependent job's start minus its
// prerequisite's end, while slots are idle. Each round submits -width
// two-stage pipelines (a job, then a job needing its target) and waits for
// them; the times are the ones the placeholders reported (both stages run
// on the same kind of host, so one clock).
func hops(args []string) error {
	fs := flag.NewFlagSet("hops", flag.ExitOnError)
	rounds := fs.Int("rounds", 100, "rounds")
	width := fs.Int("width", 2, "pipelines per round (fewer than the slots, so slots idle)")
	cmd := fs.String("cmd", "sleep 0.02", "command of each stage")
	prefix := fs.String("prefix", "hop", "prefix of target names")
	fs.Parse(args)
	if *rounds < 1 || *width < 1 {
		return errors.New("-rounds and -width must be at least 1")
	}
	ctx := context.Background()
	cl, err := dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	var ds []time.Duration
	for r := 0; r < *rounds; r++ {
		var specs []protocol.JobSpec
		for w := 0; w < *width; w++ {
			a := *prefix + strconv.Itoa(r) + "-" + strconv.Itoa(w) + "a"
			b := *prefix + strconv.Itoa(r) + "-" + strconv.Itoa(w) + "b"
			specs = append(specs, protocol.JobSpec{Target: a, Command: *cmd, Cwd: "/tmp"},
				protocol.JobSpec{Target: b, Prereqs: []string{a}, Command: *cmd, Cwd: "/tmp"})
		}
		ids, err := client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: specs})
		if err != nil {
			return err
		}
		jobs, err := waitEnded(ctx, cl, ids.IDs)
		if err != nil {
			return err
		}
		for i := 0; i+1 < len(jobs); i += 2 {
			end, err1 := time.Parse(time.RFC3339Nano, jobs[i].Finished)
			start, err2 := time.Parse(time.RFC3339Nano, jobs[i+1].Started)
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			ds = append(ds, start.Sub(end))
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	fmt.Printf("hops=%d median_ms=%s p90_ms=%s p99_ms=%s max_ms=%s\n", len(ds),
		ms(percentile(ds, 0.5)), ms(percentile(ds, 0.9)), ms(percentile(ds, 0.99)), ms(ds[len(ds)-1]))
	return nil
}

// waitEnded waits (op wait, so no polling loads the CLS while hops are
// measured) until every job in ids has ended and returns them in the order
// of ids; a job that did not end Done is an error.
func waitEnded(ctx context.Context, cl *client.Client, ids []int64) ([]protocol.JobInfo, error) {
	for {
		w, err := client.Do(ctx, cl, protocol.OpWait, protocol.Wait{IDs: ids, TimeoutMS: 60_000})
		if err != nil {
			return nil, err
		}
		for _, j := range w.Jobs {
			if j.State != "D" {
				return nil, fmt.Errorf("job %d ended %s", j.ID, j.State)
			}
		}
		if len(w.Pending) == 0 {
			break
		}
	}
	var jobs []protocol.JobInfo
	err := client.Stream(ctx, cl, protocol.OpStat, protocol.Stat{IDs: ids, States: "WQHEDFBX"}, func(r protocol.StatReply) error {
		jobs = append(jobs, r.Jobs...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(jobs) != len(ids) {
		return nil, fmt.Errorf("stat listed %d of %d jobs", len(jobs), len(ids))
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].ID < jobs[b].ID })
	return jobs, nil
}
