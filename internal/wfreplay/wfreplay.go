// Package wfreplay turns a real workflow trace (package wfformat) into
// mq jobs that replay it: one job per task, in a target of its own that
// needs its parents' targets and the producers of its inputs; each job
// sleeps the task's scaled measured runtime, and with files it reads its
// scaled inputs and writes its scaled outputs (real bytes, declared as
// the job's inputs and outputs, so data staging moves them between
// sites). mqsub --wfformat, mqbench wfreplay and the sites suite's live
// plan replay all build their jobs here.
package wfreplay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/internal/wfformat"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// MaxScale bounds a scale: a replay scales a trace down (or a little up),
// never by orders of magnitude that would make a file or a sleep absurd.
const MaxScale = 1000

// Options says how a trace becomes jobs.
type Options struct {
	TimeScale float64 // runtimes x this (above 0, at most MaxScale)
	SizeScale float64 // file sizes x this (above 0, at most MaxScale); unused without Files
	// MinRuntime raises a scaled runtime below it (seconds; 0: none).
	MinRuntime float64
	// TargetPrefix goes before each task's id to make its target.
	TargetPrefix string
	// Files makes each job read its inputs and write its outputs at their
	// scaled sizes, declared (-i/-o); without, a job only sleeps.
	Files bool
	// Dir is the relative directory the files are in ("": the job's
	// working directory); jobs make it.
	Dir string
	// Est declares each job's scaled runtime as its estimate (mqsub --est).
	Est bool
	// Cores asks for each task's cores (mqsub --cpus).
	Cores bool
	// Mem asks for each task's measured memory, rounded up to a MiB and
	// at least MinMem (mqsub --mem); a task the trace gives none asks for
	// nothing.
	Mem bool
}

// MinMem is the least memory a replayed task asks for: its job's shell,
// sleep, cat and head hold a few MiB between them, more than the
// smallest tasks of real traces measured (3 MB), and a request below
// what the job itself holds would have it killed for memory.
const MinMem = 16 << 20

// Replay is a trace as jobs.
type Replay struct {
	Jobs []protocol.JobSpec // in an order where parents come first
	// Inputs are the workflow's own inputs (files no task writes) at
	// their scaled sizes: to be made before the jobs run (with Files).
	Inputs []File
	// Roots are the targets of tasks without prerequisites; Leaves those
	// no other task needs.
	Roots, Leaves []string
	// Edges counts the prerequisite targets over all jobs.
	Edges int
}

// File is a file of the replay: its path (relative, in Options.Dir) and
// scaled size.
type File struct {
	Path string
	Size int64
}

// CheckScale says why v cannot be a scale (nil if it can).
func CheckScale(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 || v > MaxScale {
		return fmt.Errorf("%v is not a scale: want a number above 0, at most %d", v, MaxScale)
	}
	return nil
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// New builds the jobs that replay w.
func New(w *wfformat.Workflow, o Options) (*Replay, error) {
	if err := CheckScale(o.TimeScale); err != nil {
		return nil, fmt.Errorf("time scale: %w", err)
	}
	if o.Files {
		if err := CheckScale(o.SizeScale); err != nil {
			return nil, fmt.Errorf("size scale: %w", err)
		}
	}
	if o.Dir != "" && (strings.HasPrefix(o.Dir, "/") || strings.Contains(o.Dir, "..") || unsafe.MatchString(strings.ReplaceAll(o.Dir, "/", "_"))) {
		return nil, fmt.Errorf("directory %q: want a plain relative path", o.Dir)
	}
	w = Scale(w, o)
	b := &builder{o: o, w: w, r: &Replay{}, paths: map[string]string{}, taken: map[string]bool{},
		producer: map[string]string{}, needed: map[string]bool{}, inputSeen: map[string]bool{}}
	for _, t := range w.Tasks {
		for _, f := range t.Outputs {
			if _, ok := b.producer[f]; !ok {
				b.producer[f] = t.ID
			}
		}
	}
	r := b.r
	for _, t := range w.Tasks {
		js, err := b.job(t)
		if err != nil {
			return nil, err
		}
		if len(js.Prereqs) == 0 {
			r.Roots = append(r.Roots, js.Target)
		}
		r.Edges += len(js.Prereqs)
		r.Jobs = append(r.Jobs, js)
	}
	for _, t := range w.Tasks {
		if !b.needed[t.ID] {
			r.Leaves = append(r.Leaves, b.target(t.ID))
		}
	}
	return r, nil
}

// builder turns a scaled workflow's tasks into jobs, one at a time.
type builder struct {
	o         Options
	w         *wfformat.Workflow
	r         *Replay
	paths     map[string]string // trace file name -> path
	taken     map[string]bool   // paths given
	producer  map[string]string // file -> the first task that writes it
	needed    map[string]bool   // tasks some job waits for
	inputSeen map[string]bool   // workflow inputs listed in r.Inputs
}

func (b *builder) target(id string) string { return b.o.TargetPrefix + id }

func (b *builder) size(name string) int64 { return b.w.FileSizes[name] }

// path is the path of trace file name: a name safe in a shell word and
// on any filesystem; two trace names that clean up alike get distinct
// ones.
func (b *builder) path(name string) string {
	if p, ok := b.paths[name]; ok {
		return p
	}
	base := unsafe.ReplaceAllString(name, "_")
	if base == "" || base[0] == '-' || base[0] == '.' {
		base = "f" + base
	}
	p := base
	for k := 2; b.taken[p]; k++ {
		p = base + "." + strconv.Itoa(k)
	}
	b.taken[p] = true
	if b.o.Dir != "" {
		p = b.o.Dir + "/" + p
	}
	b.paths[name] = p
	return p
}

// job is task t's job: after its parents and the producers of its
// inputs, reading its inputs, sleeping its runtime and writing its
// outputs.
func (b *builder) job(t wfformat.Task) (protocol.JobSpec, error) {
	js := protocol.JobSpec{Target: b.target(t.ID)}
	if err := job.ValidName("target", js.Target); err != nil {
		return js, fmt.Errorf("task %q: %w", t.ID, err)
	}
	pre := map[string]bool{}
	addPre := func(id string) {
		if id != t.ID && !pre[id] {
			pre[id] = true
			js.Prereqs = append(js.Prereqs, b.target(id))
			b.needed[id] = true
		}
	}
	for _, p := range t.Parents {
		addPre(p)
	}
	if b.o.Cores {
		js.CPUs = max(t.Cores, 1)
	}
	if b.o.Mem && t.Mem > 0 {
		const mib = 1 << 20
		js.Mem = max((t.Mem+mib-1)/mib*mib, MinMem)
	}
	rt := t.Runtime
	if rt > protocol.MaxSeconds {
		// Refused here, naming the task, rather than by the CLS as
		// "line N" of a bulk the user never wrote.
		return js, fmt.Errorf("task %q runs %g s at this time scale, more than a job may (%g s, about 31 years)", t.ID, rt, float64(protocol.MaxSeconds))
	}
	if b.o.Est {
		js.Est = rt
	}
	var cmd []string
	if b.o.Files {
		cmd = b.reads(t, &js, addPre)
	}
	cmd = append(cmd, "sleep "+strconv.FormatFloat(rt, 'f', 3, 64))
	if b.o.Files {
		cmd = append(cmd, b.writes(t, &js)...)
	}
	js.Command = strings.Join(cmd, " && ")
	return js, nil
}

// reads adds task t's inputs to js, and the producers of those made by
// other tasks as prerequisites through addPre, and returns the command
// that reads them. Inputs no task makes are the workflow's: listed once
// in r.Inputs.
func (b *builder) reads(t wfformat.Task, js *protocol.JobSpec, addPre func(string)) []string {
	var reads []string
	seen := map[string]bool{}
	for _, f := range t.Inputs {
		if p, ok := b.producer[f]; ok {
			if p == t.ID {
				continue // it reads what it writes: not an input
			}
			addPre(p)
		} else if !b.inputSeen[f] {
			b.inputSeen[f] = true
			b.r.Inputs = append(b.r.Inputs, File{Path: b.path(f), Size: b.size(f)})
		}
		if seen[f] {
			continue
		}
		seen[f] = true
		sz := b.size(f)
		js.Inputs = append(js.Inputs, protocol.File{Path: b.path(f), Size: &sz})
		reads = append(reads, b.path(f))
	}
	if len(reads) == 0 {
		return nil
	}
	return []string{"cat " + strings.Join(reads, " ") + " > /dev/null"}
}

// writes adds to js the outputs task t is the first to write and returns
// the commands that write them.
func (b *builder) writes(t wfformat.Task, js *protocol.JobSpec) []string {
	var cmd []string
	if b.o.Dir != "" && len(t.Outputs) > 0 {
		cmd = append(cmd, "mkdir -p "+b.o.Dir)
	}
	seen := map[string]bool{}
	for _, f := range t.Outputs {
		if b.producer[f] != t.ID || seen[f] {
			continue // written by an earlier task: that one makes it
		}
		seen[f] = true
		sz := b.size(f)
		js.Outputs = append(js.Outputs, protocol.File{Path: b.path(f), Size: &sz})
		cmd = append(cmd, fmt.Sprintf("head -c %d /dev/zero > %s", sz, b.path(f)))
	}
	return cmd
}

// maxFile bounds a scaled size (1 PiB), so that a hostile trace cannot
// overflow a sum of them.
const maxFile = 1 << 50

// Scale returns w with its runtimes and file sizes scaled as o says: a
// runtime x TimeScale, at least MinRuntime; a size x SizeScale (when
// Files; else sizes stay), at least 1 byte unless the trace gives 0.
// What the jobs New makes run and write is this trace's, and so should
// a model that predicts them be.
func Scale(w *wfformat.Workflow, o Options) *wfformat.Workflow {
	out := &wfformat.Workflow{Name: w.Name, Makespan: w.Makespan * o.TimeScale, FileSizes: make(map[string]int64, len(w.FileSizes))}
	for name, size := range w.FileSizes {
		if o.Files && size > 0 {
			size = int64(max(1, min(math.Round(float64(size)*o.SizeScale), maxFile)))
		}
		out.FileSizes[name] = size
	}
	out.Tasks = make([]wfformat.Task, len(w.Tasks))
	for i, t := range w.Tasks {
		t.Runtime = max(t.Runtime*o.TimeScale, o.MinRuntime)
		out.Tasks[i] = t
	}
	return out
}

// InputBytes is the bytes of the workflow's own inputs, scaled.
func (r *Replay) InputBytes() int64 {
	var n int64
	for _, f := range r.Inputs {
		if n += f.Size; n < 0 || n > math.MaxInt64/2 {
			return math.MaxInt64 // past any bound a caller would set
		}
	}
	return n
}

// OutputBytes is the bytes the jobs write, scaled: what the replay will
// put on the disks where its jobs run.
func (r *Replay) OutputBytes() int64 {
	var n int64
	for _, j := range r.Jobs {
		for _, f := range j.Outputs {
			if f.Size == nil {
				continue
			}
			if n += *f.Size; n < 0 || n > math.MaxInt64/2 {
				return math.MaxInt64
			}
		}
	}
	return n
}

// WriteJSONL writes the jobs as mqsub -f lines.
func WriteJSONL(w io.Writer, jobs []protocol.JobSpec) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range jobs {
		if err := enc.Encode(&jobs[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}
