package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/internal/resource"
)

// Resources is what one job asks of a placeholder: cores, memory, GPUs
// and amounts of resources a site declares (licences, scratch disk, ...).
// The zero value asks for nothing beyond today's one slot. A job carries
// it as submitted (JobSpec), as listed (JobInfo); a queue carries one as
// the default of its jobs (QueueInfo.Defaults).
//
// In a job file "cpus" and "mem" may also be written as a person would
// (see ReadJobFile): "cpus": "auto", "mem": "8G".
type Resources struct {
	// CPUs is the cores the job runs on; 0 means one (or the queue's
	// default).
	CPUs int `json:"cpus,omitempty"`
	// CPUsAuto asks for the cores to be learned from the finished jobs of
	// the same queue and target (mqsub --cpus auto).
	CPUsAuto bool `json:"cpus_auto,omitempty"`
	// Mem is the memory the job may use, in bytes; 0 means not counted
	// (or the queue's default).
	Mem int64 `json:"mem_bytes,omitempty"`
	// MemAuto asks for the memory to be learned (mqsub --mem auto).
	MemAuto bool `json:"mem_auto,omitempty"`
	// GPUs is the whole GPUs the job is given.
	GPUs int `json:"gpus,omitempty"`
	// Named are amounts of site-declared resources, by name.
	Named map[string]int `json:"resources,omitempty"`
}

// Bounds of a request: anything larger is a typo, not a machine.
const (
	MaxCPUs          = resource.MaxCPUs
	MaxGPUs          = resource.MaxGPUs
	MaxMem           = 1 << 50 // bytes: 1 PiB
	MaxNamed         = 32      // named resources of one request
	MaxNamedAmount   = math.MaxInt32
	maxResourceName  = 64
	resourceNameHint = "letters, digits and _, not starting with a digit"
)

// Asks reports whether r asks for anything beyond one slot's default.
// (Its methods are not IsZero or String: Resources is embedded in JobSpec
// and JobInfo, whose encoding and printing must not change.)
func (r Resources) Asks() bool {
	return !r.none()
}

func (r Resources) none() bool {
	return r.CPUs == 0 && !r.CPUsAuto && r.Mem == 0 && !r.MemAuto && r.GPUs == 0 && len(r.Named) == 0
}

// CheckResources reports, in one line, the first thing wrong with r.
func CheckResources(r Resources) error {
	switch {
	case r.CPUs < 0:
		return fmt.Errorf("cpus %d: must be at least 1", r.CPUs)
	case r.CPUs > MaxCPUs:
		return fmt.Errorf("cpus %d: more than %d", r.CPUs, MaxCPUs)
	case r.CPUsAuto && r.CPUs != 0:
		return fmt.Errorf("cpus: give a count or auto, not both")
	case r.Mem < 0:
		return fmt.Errorf("memory %d bytes: must be more than zero", r.Mem)
	case r.Mem > MaxMem:
		return fmt.Errorf("memory %s: more than %s", resource.FormatMem(r.Mem), resource.FormatMem(MaxMem))
	case r.MemAuto && r.Mem != 0:
		return fmt.Errorf("mem: give a size or auto, not both")
	case r.GPUs < 0:
		return fmt.Errorf("gpus %d: must be at least 1", r.GPUs)
	case r.GPUs > MaxGPUs:
		return fmt.Errorf("gpus %d: more than %d", r.GPUs, MaxGPUs)
	case len(r.Named) > MaxNamed:
		return fmt.Errorf("%d named resources; at most %d", len(r.Named), MaxNamed)
	}
	for _, name := range sortedNamed(r.Named) {
		if err := checkResourceName(name); err != nil {
			return err
		}
		switch n := r.Named[name]; {
		case n < 1:
			return fmt.Errorf("resource %s=%d: must be at least 1", name, n)
		case n > MaxNamedAmount:
			return fmt.Errorf("resource %s=%d: more than %d", name, n, MaxNamedAmount)
		}
	}
	return nil
}

func checkResourceName(name string) error {
	if len(name) > maxResourceName {
		return fmt.Errorf("resource name %s...: longer than %d bytes", Printable(name[:20]), maxResourceName)
	}
	ok := name != ""
	for i := 0; i < len(name) && ok; i++ {
		c := name[i]
		ok = c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' && i > 0
	}
	if !ok {
		return fmt.Errorf("resource name %s is not a name (%s)", Quote(name), resourceNameHint)
	}
	switch strings.ToLower(name) {
	case "cpus", "mem", "gpus":
		return fmt.Errorf("resource %s has its own key, %q", name, strings.ToLower(name))
	}
	return nil
}

// SetCPUs sets r's cores from what a person writes: a positive count, or
// "auto".
func (r *Resources) SetCPUs(s string) error {
	var q resource.Request
	if err := q.SetCPUs(s); err != nil {
		return err
	}
	r.CPUs, r.CPUsAuto = q.CPUs, q.AutoCPUs
	return nil
}

// SetMem sets r's memory from what a person writes: a size as Slurm
// writes it ("8G", "500M", "1.5G", a bare number in MiB), or "auto".
func (r *Resources) SetMem(s string) error {
	var q resource.Request
	if err := q.SetMem(s); err != nil {
		return err
	}
	if q.Mem > MaxMem {
		return fmt.Errorf("memory %q: more than %s", s, resource.FormatMem(MaxMem))
	}
	r.Mem, r.MemAuto = q.Mem, q.AutoMem
	return nil
}

// SetGPUs sets r's GPUs from a positive count.
func (r *Resources) SetGPUs(s string) error {
	n, err := resource.ParseGPUs(s)
	if err != nil {
		return err
	}
	r.GPUs = n
	return nil
}

// AddNamed adds a "NAME=N" amount; a name given twice is an error.
func (r *Resources) AddNamed(s string) error {
	name, n, err := resource.ParseNamed(s)
	if err != nil {
		return err
	}
	if len(name) > maxResourceName {
		return fmt.Errorf("resource name %s...: longer than %d bytes", Printable(name[:20]), maxResourceName)
	}
	if _, dup := r.Named[name]; dup {
		return fmt.Errorf("resource %s given twice", name)
	}
	if len(r.Named) >= MaxNamed {
		return fmt.Errorf("more than %d named resources", MaxNamed)
	}
	if r.Named == nil {
		r.Named = make(map[string]int)
	}
	r.Named[name] = n
	return nil
}

// WithDefaults is r with each amount it leaves unset taken from def (a
// queue's defaults): cores, memory, GPUs, and each named resource.
func (r Resources) WithDefaults(def Resources) Resources {
	if r.CPUs == 0 && !r.CPUsAuto {
		r.CPUs, r.CPUsAuto = def.CPUs, def.CPUsAuto
	}
	if r.Mem == 0 && !r.MemAuto {
		r.Mem, r.MemAuto = def.Mem, def.MemAuto
	}
	if r.GPUs == 0 {
		r.GPUs = def.GPUs
	}
	if len(def.Named) > 0 {
		named := make(map[string]int, len(r.Named)+len(def.Named))
		for k, v := range def.Named {
			named[k] = v
		}
		for k, v := range r.Named {
			named[k] = v
		}
		r.Named = named
	}
	return r
}

// Describe formats r as mqsub's flags spell it, "cpus=4 mem=8 GiB gpus=1
// licence=2", leaving out what r does not ask for; "" for the zero
// request.
func (r Resources) Describe() string {
	var parts []string
	switch {
	case r.CPUsAuto:
		parts = append(parts, "cpus=auto")
	case r.CPUs > 0:
		parts = append(parts, "cpus="+strconv.Itoa(r.CPUs))
	}
	switch {
	case r.MemAuto:
		parts = append(parts, "mem=auto")
	case r.Mem > 0:
		parts = append(parts, "mem="+resource.FormatMem(r.Mem))
	}
	if r.GPUs > 0 {
		parts = append(parts, "gpus="+strconv.Itoa(r.GPUs))
	}
	for _, name := range sortedNamed(r.Named) {
		parts = append(parts, fmt.Sprintf("%s=%d", Printable(name), r.Named[name]))
	}
	return strings.Join(parts, " ")
}

func sortedNamed(m map[string]int) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// fileResources are the keys of a job-file line that a person writes
// differently from the wire: "cpus" a count or "auto", "mem" a size
// ("8G", a bare number in MiB) or "auto", "gpus" a count. They shadow
// Resources' own "cpus" and "gpus" when a line is decoded (see jobLine).
type fileResources struct {
	CPUs json.RawMessage `json:"cpus"`
	Mem  json.RawMessage `json:"mem"`
	GPUs json.RawMessage `json:"gpus"`
}

// apply sets the keys a line gave on r.
func (f fileResources) apply(r *Resources) error {
	if f.CPUs != nil {
		if r.CPUsAuto {
			return errors.New(`give "cpus" or "cpus_auto", not both`)
		}
		s, err := countOrWord("cpus", f.CPUs)
		if err != nil {
			return err
		}
		if err := r.SetCPUs(s); err != nil {
			return err
		}
	}
	if f.Mem != nil {
		if r.Mem != 0 || r.MemAuto {
			return errors.New(`give "mem" or "mem_bytes", not both`)
		}
		s, err := countOrWord("mem", f.Mem)
		if err != nil {
			return err
		}
		if err := r.SetMem(s); err != nil {
			return err
		}
	}
	if f.GPUs != nil {
		s, err := countOrWord("gpus", f.GPUs)
		if err != nil {
			return err
		}
		if err := r.SetGPUs(s); err != nil {
			return err
		}
	}
	return nil
}

// countOrWord is a JSON number or string as the text a flag would take.
func countOrWord(key string, raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		return n.String(), nil
	}
	if key == "mem" {
		return "", fmt.Errorf(`"mem": want a size such as "8G" or "500M", a number of MiB, or "auto"`)
	}
	return "", fmt.Errorf("%q: want a positive integer%s", key, map[bool]string{true: ` or "auto"`}[key == "cpus"])
}
