package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mq-hpc/mq/wfformat"
)

// wfreplay replays real workflow traces (WfFormat) through a running CLS:
// every task becomes a job `sleep RUNTIME*SCALE` in a target of its own,
// needing its parents' targets, submitted with one `mqsub -f`; the clock
// runs from the submit to the last job Done. The scale is chosen per trace
// so that its lower bound on -slots slots, max(critical path, work/slots),
// lasts -bound. Prints one line per trace: the makespan, the bound and
// their ratio.
func wfreplay(args []string) error {
	fs := flag.NewFlagSet("wfreplay", flag.ExitOnError)
	slots := fs.Int("slots", 8, "slots the CLS runs jobs on (for the bound)")
	bound := fs.Duration("bound", 10*time.Second, "scale each trace so its lower bound lasts this long")
	poll := fs.Duration("poll", 20*time.Millisecond, "summary poll interval")
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
	for k, path := range fs.Args() {
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
		jobs, err := os.CreateTemp("", "wfreplay-*.jsonl")
		if err != nil {
			return err
		}
		defer os.Remove(jobs.Name())
		prefix := "wf" + strconv.Itoa(k) + "-"
		bw := bufio.NewWriter(jobs)
		for _, t := range w.Tasks {
			bw.WriteString(`{"target":`)
			bw.WriteString(strconv.Quote(prefix + t.ID))
			if len(t.Parents) > 0 {
				bw.WriteString(`,"prereqs":[`)
				for i, p := range t.Parents {
					if i > 0 {
						bw.WriteByte(',')
					}
					bw.WriteString(strconv.Quote(prefix + p))
				}
				bw.WriteByte(']')
			}
			fmt.Fprintf(bw, `,"command":"sleep %.3f"}`+"\n", t.Runtime*scale)
		}
		if err := bw.Flush(); err != nil {
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
		if err := waitDone(ctx, cl, c0, len(w.Tasks), *poll); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		el := time.Since(t0).Seconds()
		fmt.Printf("trace=%s tasks=%d scale=%.4g critical_path_s=%.3f work_per_slot_s=%.3f bound_s=%.3f makespan_s=%.3f ratio=%.3f\n",
			strings.TrimSuffix(filepath.Base(path), ".json"), len(w.Tasks), scale, w.CriticalPath()*scale,
			w.Work()*scale/float64(*slots), bound.Seconds(), el, el/bound.Seconds())
	}
	return nil
}
