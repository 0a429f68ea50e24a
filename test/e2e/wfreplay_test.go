//go:build e2e

package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/wfformat"
)

// TestMqsubWfformat replays a small real trace (srasearch, 22 tasks,
// 10.7 GB of files) scaled down hard with `mqsub --wfformat` on a local
// CLS, to every job Done: one job per task, each job's prerequisites its
// task's parents, no job started before each of its parents ended, and
// every file of the trace in the directory at its scaled size (the
// trace's own inputs made by mqsub, the rest written by the jobs).
func TestMqsubWfformat(t *testing.T) {
	trace, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "data", "wfinstances", "srasearch-chameleon-10a-001.json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(trace)
	if err != nil {
		t.Skipf("no trace: %v", err)
	}
	w, err := wfformat.Read(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	const ts, ss = 0.002, 1e-5 // runtimes up to 1.8 s, 107 KB of files
	h := newHarness(t)
	h.startCLS("--local", "4")
	dir := t.TempDir()
	r := h.runIn(dir, nil, "mqsub", "--wfformat", trace, "--time-scale", "0.002", "--size-scale", "1e-5", "--target-prefix", "sra-", "-q", "replay")
	if r.code != 0 {
		t.Fatalf("mqsub --wfformat: %v", r)
	}
	if n := len(strings.Fields(r.stdout)); n != len(w.Tasks) {
		t.Fatalf("mqsub --wfformat printed %d ids for %d tasks", n, len(w.Tasks))
	}
	var jobs []jobInfo
	waitFor(t, 5*time.Minute, func() error {
		jobs = h.jobs("-q", "replay")
		for _, j := range jobs {
			if j.State == "F" || j.State == "B" {
				t.Fatalf("job %d (%s) ended %s: %s", j.ID, j.Target, j.State, j.Reason)
			}
			if j.State != "D" {
				return fmt.Errorf("job %d (%s) is %s", j.ID, j.Target, j.State)
			}
		}
		return nil
	})
	if len(jobs) != len(w.Tasks) {
		t.Fatalf("%d jobs for %d tasks", len(jobs), len(w.Tasks))
	}
	byTarget := map[string]jobInfo{}
	for _, j := range jobs {
		byTarget[j.Target] = j
	}
	edges := 0
	for _, task := range w.Tasks {
		j, ok := byTarget["sra-"+task.ID]
		if !ok {
			t.Fatalf("no job for task %s", task.ID)
		}
		if len(j.Prereqs) != len(task.Parents) {
			t.Errorf("job %s needs %v; the task's parents are %v", j.Target, j.Prereqs, task.Parents)
		}
		started := parseTime(t, j.Target+" started", j.Started)
		// Each job sleeps its task's scaled runtime.
		if took := parseTime(t, j.Target+" finished", j.Finished).Sub(started).Seconds(); took < task.Runtime*ts-0.01 {
			t.Errorf("job %s took %.3f s; its task ran %.1f s, scaled %.3f s", j.Target, took, task.Runtime, task.Runtime*ts)
		}
		for _, p := range task.Parents {
			edges++
			pj := byTarget["sra-"+p]
			if !slices.Contains(j.Prereqs, "sra-"+p) {
				t.Errorf("job %s does not need its parent %s: %v", j.Target, p, j.Prereqs)
			}
			if ended := parseTime(t, pj.Target+" finished", pj.Finished); started.Before(ended) {
				t.Errorf("job %s started at %s, before its parent %s ended at %s", j.Target, j.Started, pj.Target, pj.Finished)
			}
		}
	}
	if edges == 0 {
		t.Fatal("the trace has no edges to check")
	}
	for name, size := range w.FileSizes {
		want := int64(0)
		if size > 0 {
			want = max(1, int64(math.Round(float64(size)*ss)))
		}
		p := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name))
		fi, err := os.Stat(p)
		if err != nil || fi.Size() != want {
			t.Errorf("file %s: %v, %v; want %d bytes (%d scaled by %g)", name, fi, err, want, size, ss)
		}
	}
}
