package sim

import (
	"fmt"

	"github.com/mq-hpc/mq/internal/wfformat"
)

// GridLevel is one level of a traced workflow run as a bag of tasks:
// the tasks at the same depth (longest chain of parents) do not depend on
// each other, and read files made by earlier levels or given.
type GridLevel struct {
	Name  string // workflow/level
	Depth int
	Tasks []GridTask
	Bytes int64 // input bytes, shared files once
}

// TraceLevels returns the levels of w with at least minTasks tasks. A
// task's cost is its traced runtime times speedOfTrace, the speed the
// traced host is taken to have (the seed's grid has mean speed 10). Files
// whose size the trace does not give count 0 bytes.
func TraceLevels(w *wfformat.Workflow, minTasks int, speedOfTrace float64) ([]GridLevel, error) {
	if speedOfTrace <= 0 {
		return nil, fmt.Errorf("the traced host's speed must be > 0")
	}
	depth := make(map[string]int, len(w.Tasks))
	var levels []GridLevel
	for _, t := range w.Tasks { // parents come first
		d := 0
		for _, p := range t.Parents {
			d = max(d, depth[p]+1)
		}
		depth[t.ID] = d
		for len(levels) <= d {
			levels = append(levels, GridLevel{Name: fmt.Sprintf("%s/%d", w.Name, len(levels)), Depth: len(levels)})
		}
		gt := GridTask{Cost: t.Runtime * speedOfTrace}
		for _, in := range t.Inputs {
			gt.Inputs = append(gt.Inputs, GridFile{Name: in, Bytes: w.FileSizes[in]})
		}
		levels[d].Tasks = append(levels[d].Tasks, gt)
	}
	var out []GridLevel
	for _, l := range levels {
		if len(l.Tasks) < minTasks {
			continue
		}
		seen := map[string]bool{}
		for _, t := range l.Tasks {
			for _, f := range t.Inputs {
				if !seen[f.Name] {
					seen[f.Name] = true
					l.Bytes += f.Bytes
				}
			}
		}
		out = append(out, l)
	}
	return out, nil
}
