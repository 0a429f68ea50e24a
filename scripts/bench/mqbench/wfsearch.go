package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/plan"
	"github.com/mq-hpc/mq/internal/policy"
)

// wfsearch looks for a better priority list than cp's for each WfFormat
// trace on -slots ideal slots (no overhead), with plan.SearchList (what
// cls plan make --planner list does): every list is decoded the way the
// CLS follows a plan's order, so whatever it finds a live CLS can follow.
// It starts from wfideal's cp list. Prints the best makespan over
// max(critical path, work/slots) and over the best lower bound (fbBound,
// pairBound); -order DIR writes the best list, one task id a line, in
// the order the tasks start.
func wfsearch(args []string) error {
	fs := flag.NewFlagSet("wfsearch", flag.ExitOnError)
	slots := fs.Int("slots", 8, "ideal slots")
	seed := fs.Uint64("seed", 1, "random seed")
	evals := fs.Int("evals", 1_000_000, "lists to decode per trace")
	limit := fs.Duration("time", 90*time.Second, "time cap per trace")
	orderDir := fs.String("order", "", "write each trace's best list to DIR/TRACE.order")
	fs.Parse(args)
	if fs.NArg() == 0 {
		return errors.New("need WfFormat trace files")
	}
	for _, path := range fs.Args() {
		w, d, err := readTaskDAG(path)
		if err != nil {
			return err
		}
		lb := w.LowerBound(*slots)
		best := max(d.fbBound(*slots), d.pairBound(*slots))
		t0 := time.Now()
		r, err := plan.SearchList(context.Background(), d.runtime, d.prereqs, *slots, *seed, *evals, *limit, d.cpList())
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		fmt.Printf("trace=%s tasks=%d slots=%d seed=%d bound_s=%.2f best_bound_s=%.2f searched_s=%.2f best_bound=%.4f cp=%.4f fbi=%.4f searched=%.4f searched_vs_best_bound=%.5f gap_s=%.3f evals=%d capped=%v secs=%.1f\n",
			name, len(w.Tasks), *slots, *seed, lb, best, r.Makespan, best/lb, r.First/lb, r.Justified/lb, r.Makespan/lb, r.Makespan/best, r.Makespan-best, r.Evals, r.Capped, time.Since(t0).Seconds())
		if *orderDir != "" {
			var b strings.Builder
			for _, i := range r.List {
				fmt.Fprintln(&b, w.Tasks[i].ID)
			}
			if err := os.WriteFile(filepath.Join(*orderDir, name+".order"), []byte(b.String()), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// cpList is cp's list as wfideal ranks it: by b-level from the runtimes
// (as float32, as Ready.Prio carries it), the earlier task first among
// equals, so that decoding it is taskDAG.schedule with policy.CP.
func (d *taskDAG) cpList() []int32 {
	b, _ := policy.BLevels(d.runtime, d.prereqs)
	list := make([]int32, len(b))
	for i := range list {
		list[i] = int32(i)
	}
	slices.SortStableFunc(list, func(x, y int32) int { return cmp.Compare(float32(b[y]), float32(b[x])) })
	return list
}
