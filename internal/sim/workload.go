package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"

	"github.com/mq-hpc/mq/internal/resource"
)

// Workload is a workflow: files and the jobs that read and write them.
// Jobs are submitted phase by phase, as a driver that waits at a barrier
// between phases does (the thesis's PA: all BLAST jobs, then all parsing);
// within a phase a job is ready once the jobs it needs have finished.
type Workload struct {
	Files []File
	Jobs  []WorkloadJob
}

// File is a named file. Files no job writes exist before the run, at Host
// (or outside the metacomputer, Host < 0); the others appear on the host
// where their producer ran.
type File struct {
	Name     string
	Bytes    int64
	Host     int
	producer int32 // job index, or -1
}

// WorkloadJob is one job of a workload, submitted to the simulated metaqueue
// (for the PA workload, a bundle of 16 tasks).
type WorkloadJob struct {
	Name     string
	Group    string  // target or command name, for SJF's learned estimates
	Phase    int     // submission phase
	Runtime  float64 // actual seconds
	Estimate float64 // declared seconds; 0 = none (SJF then learns from the group)
	Tasks    int     // tasks in the job, the unit of data affinity
	In, Out  []int32 // file indices
	deps     []int32 // jobs that must finish first: input producers, After and AfterAny
	// Request is what the job asks of a placeholder (resources.go); the
	// zero value is one core.
	Request resource.Request
}

// PA builds the thesis's synthetic Proteome Analyst workload (table 6.1):
// pipelines of BLAST then Parsing; each pipeline's sequence file is
// uniform in 250-850 B and lives outside the metacomputer; BLAST runtime
// (2-8 s), homologue file size (5,000-85,000 B) and parsing runtime
// (0.5-0.7 s) grow linearly with it. Homogeneous batching groups batch
// consecutive BLAST jobs into one job, and the same pipelines' parsing jobs
// into one job in the second phase; estimates are exact.
func PA(seed uint64, pipelines, batch int) *Workload {
	if batch < 1 {
		batch = 1
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed_0006))
	w := &Workload{}
	type pipe struct {
		seq, hom     int32
		blast, parse float64
	}
	ps := make([]pipe, pipelines)
	for i := range ps {
		size := 250 + 600*rng.Float64()
		f := (size - 250) / 600
		ps[i] = pipe{
			seq:   int32(len(w.Files)),
			hom:   int32(len(w.Files) + 1),
			blast: 2 + 6*f,
			parse: 0.5 + 0.2*f,
		}
		w.Files = append(w.Files,
			File{Name: fmt.Sprintf("seq-%d", i+1), Bytes: int64(math.Round(size)), Host: -1, producer: -1},
			File{Name: fmt.Sprintf("hom-%d", i+1), Bytes: int64(math.Round(5000 + 80000*f)), producer: -1})
	}
	for phase, group := range []string{"blast", "parse"} {
		for lo := 0; lo < pipelines; lo += batch {
			hi := min(lo+batch, pipelines)
			j := WorkloadJob{Name: fmt.Sprintf("%s-%d", group, lo/batch+1), Group: group, Phase: phase, Tasks: hi - lo}
			for _, p := range ps[lo:hi] {
				if phase == 0 {
					j.Runtime += p.blast
					j.In = append(j.In, p.seq)
					j.Out = append(j.Out, p.hom)
				} else {
					j.Runtime += p.parse
					j.In = append(j.In, p.hom)
				}
			}
			j.Estimate = j.Runtime
			w.Jobs = append(w.Jobs, j)
		}
	}
	if err := w.link(); err != nil {
		panic("sim: PA workload: " + err.Error()) // a bug here, not bad input
	}
	return w
}

// link sets producers and dependencies and checks the workflow can run.
func (w *Workload) link() error {
	if len(w.Jobs) == 0 {
		return fmt.Errorf("no jobs")
	}
	for i := range w.Files {
		w.Files[i].producer = -1
	}
	for j := range w.Jobs {
		job := &w.Jobs[j]
		if job.Runtime < 0 || math.IsNaN(job.Runtime) || math.IsInf(job.Runtime, 0) {
			return fmt.Errorf("job %q: runtime_s must be >= 0", job.Name)
		}
		if job.Estimate < 0 || math.IsNaN(job.Estimate) || math.IsInf(job.Estimate, 0) {
			return fmt.Errorf("job %q: estimate_s must be >= 0", job.Name)
		}
		if job.Phase < 0 {
			return fmt.Errorf("job %q: phase must be >= 0", job.Name)
		}
		if job.Tasks <= 0 {
			job.Tasks = 1
		}
		for _, f := range job.Out {
			if p := w.Files[f].producer; p >= 0 {
				return fmt.Errorf("file %q is written by both %q and %q", w.Files[f].Name, w.Jobs[p].Name, job.Name)
			}
			w.Files[f].producer = int32(j)
		}
	}
	for j := range w.Jobs {
		job := &w.Jobs[j]
		for _, f := range job.In {
			if p := w.Files[f].producer; p >= 0 && !slices.Contains(job.deps, p) {
				job.deps = append(job.deps, p)
			}
		}
		for _, d := range job.deps {
			if d == int32(j) {
				return fmt.Errorf("job %q reads its own output", job.Name)
			}
			if w.Jobs[d].Phase > job.Phase {
				return fmt.Errorf("job %q (phase %d) needs %q of a later phase (%d)", job.Name, job.Phase, w.Jobs[d].Name, w.Jobs[d].Phase)
			}
		}
	}
	// Kahn's algorithm: every job must become ready eventually.
	indeg := make([]int, len(w.Jobs))
	users := make([][]int32, len(w.Jobs))
	for j, job := range w.Jobs {
		indeg[j] = len(job.deps)
		for _, d := range job.deps {
			users[d] = append(users[d], int32(j))
		}
	}
	var stack []int32
	for j, n := range indeg {
		if n == 0 {
			stack = append(stack, int32(j))
		}
	}
	seen := 0
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		seen++
		for _, u := range users[j] {
			if indeg[u]--; indeg[u] == 0 {
				stack = append(stack, u)
			}
		}
	}
	if seen != len(w.Jobs) {
		// Every job left waits on another left: walking back from one
		// for as many steps as there are jobs ends on the cycle.
		j := slices.IndexFunc(indeg, func(n int) bool { return n > 0 })
		for range w.Jobs {
			for _, d := range w.Jobs[j].deps {
				if indeg[d] > 0 {
					j = int(d)
					break
				}
			}
		}
		return fmt.Errorf("the jobs' dependencies form a cycle through %q", w.Jobs[j].Name)
	}
	return nil
}

// The workload file format (see docs/policies/simulator.md).
type workloadJSON struct {
	Files []struct {
		Name  string `json:"name"`
		Bytes int64  `json:"bytes"`
		Host  *int   `json:"host"` // absent: outside the metacomputer
	} `json:"files"`
	Jobs []struct {
		Name     string   `json:"name"`
		Group    string   `json:"group"`
		Phase    int      `json:"phase"`
		Runtime  float64  `json:"runtime_s"`
		Estimate float64  `json:"estimate_s"`
		Tasks    int      `json:"tasks"`
		In       []string `json:"in"`
		Out      []struct {
			Name  string `json:"name"`
			Bytes int64  `json:"bytes"`
		} `json:"out"`
		After []string `json:"after"`
		// AfterAny orders like After: a simulated job never fails, so
		// "ended in any state" is "done" here (mqsub --after-any).
		AfterAny []string `json:"after_any"`
		CPUs     int      `json:"cpus"`
		Mem      string   `json:"mem"`
		GPUs     int      `json:"gpus"`
	} `json:"jobs"`
}

// ReadWorkload parses a workload JSON document.
func ReadWorkload(r io.Reader) (*Workload, error) {
	var doc workloadJSON
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	if err := atEnd(dec); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	w := &Workload{}
	files := map[string]int32{}
	addFile := func(name string, bytes int64, host int) error {
		if name == "" {
			return fmt.Errorf("a file has no name")
		}
		if _, dup := files[name]; dup {
			return fmt.Errorf("file %q declared twice", name)
		}
		if bytes < 0 {
			return fmt.Errorf("file %q: bytes must be >= 0", name)
		}
		files[name] = int32(len(w.Files))
		w.Files = append(w.Files, File{Name: name, Bytes: bytes, Host: host, producer: -1})
		return nil
	}
	for _, f := range doc.Files {
		host := -1
		if f.Host != nil {
			if *f.Host < 0 {
				return nil, fmt.Errorf("workload: file %q: host must be >= 0 (omit it for outside the metacomputer)", f.Name)
			}
			host = *f.Host
		}
		if err := addFile(f.Name, f.Bytes, host); err != nil {
			return nil, fmt.Errorf("workload: %w", err)
		}
	}
	jobs := map[string]int32{}
	for i, j := range doc.Jobs {
		if j.Name == "" {
			return nil, fmt.Errorf("workload: job %d has no name", i+1)
		}
		if _, dup := jobs[j.Name]; dup {
			return nil, fmt.Errorf("workload: job %q declared twice", j.Name)
		}
		jobs[j.Name] = int32(i)
		for _, o := range j.Out {
			if err := addFile(o.Name, o.Bytes, -1); err != nil {
				return nil, fmt.Errorf("workload: job %q: %w", j.Name, err)
			}
		}
	}
	for _, j := range doc.Jobs {
		job := WorkloadJob{Name: j.Name, Group: j.Group, Phase: j.Phase, Runtime: j.Runtime, Estimate: j.Estimate, Tasks: j.Tasks}
		if j.Tasks < 0 {
			return nil, fmt.Errorf("workload: job %q: tasks %d: want 1 or more (absent: 1)", j.Name, j.Tasks)
		}
		if err := job.Request.SetCPUs(strconv.Itoa(max(j.CPUs, 1))); err != nil || j.CPUs < 0 {
			return nil, fmt.Errorf("workload: job %q: cpus %d: want 1 or more", j.Name, j.CPUs)
		}
		if job.Request.CPUs == 1 {
			job.Request.CPUs = 0 // one core, as no request
		}
		if j.Mem != "" {
			if err := job.Request.SetMem(j.Mem); err != nil || job.Request.AutoMem {
				return nil, fmt.Errorf("workload: job %q: mem %q: want a size like 8G or 500M", j.Name, j.Mem)
			}
		}
		if j.GPUs < 0 || j.GPUs > resource.MaxGPUs {
			return nil, fmt.Errorf("workload: job %q: gpus %d: want 0-%d", j.Name, j.GPUs, resource.MaxGPUs)
		}
		job.Request.GPUs = j.GPUs
		if job.Group == "" {
			job.Group = j.Name
		}
		for _, name := range j.In {
			f, ok := files[name]
			if !ok {
				return nil, fmt.Errorf("workload: job %q reads unknown file %q", j.Name, name)
			}
			job.In = append(job.In, f)
		}
		for _, o := range j.Out {
			job.Out = append(job.Out, files[o.Name])
		}
		for _, name := range slices.Concat(j.After, j.AfterAny) {
			d, ok := jobs[name]
			if !ok {
				return nil, fmt.Errorf("workload: job %q runs after unknown job %q", j.Name, name)
			}
			if !slices.Contains(job.deps, d) {
				job.deps = append(job.deps, d)
			}
		}
		w.Jobs = append(w.Jobs, job)
	}
	if err := w.link(); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	return w, nil
}

// LoadWorkload reads a workload JSON file.
func LoadWorkload(path string) (*Workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w, err := ReadWorkload(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}
