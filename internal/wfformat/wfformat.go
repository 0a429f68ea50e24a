// Package wfformat reads workflow execution traces in WfFormat, the JSON
// format of the WfCommons project (https://wfcommons.org), so that real
// workflows (Pegasus, Makeflow, ... runs) serve as workloads: replayed
// through a live CLS, simulated, and planned over.
//
// Schema 1.5 keeps the DAG in workflow.specification (tasks with parents,
// children, inputFiles, outputFiles; files with sizeInBytes) and what
// happened in workflow.execution (runtimeInSeconds per task). The older
// shape (schema 1.3/1.4: workflow.tasks with runtime or runtimeInSeconds,
// parents, and files linked as input or output) is read too. Fields that
// vary between instances are tolerated; what a workload needs (unique task
// ids, known parents, no cycle, runtimes >= 0) is checked.
package wfformat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
)

// Limits that keep a hostile or broken file from costing more than a
// workload could need.
const (
	MaxBytes = 256 << 20 // of the JSON document
	MaxTasks = 1_000_000
	// MaxRuntime bounds a task's runtime in seconds (about 31 years, a
	// job's longest estimate): past it the trace is broken, and the
	// simulators and planners would print sums of it as results.
	MaxRuntime = 1e9
)

// Workflow is a trace reduced to what a workload needs.
type Workflow struct {
	Name string
	// Tasks in topological order: every task after its parents.
	Tasks []Task
	// FileSizes gives each file's size in bytes, where the trace says it.
	FileSizes map[string]int64
	// Makespan is the measured makespan of the traced run (seconds, 0 if
	// the trace does not say).
	Makespan float64
}

// Task is one task of a workflow.
type Task struct {
	ID      string
	Name    string
	Parents []string
	// Runtime is the measured runtime in seconds.
	Runtime float64
	Cores   int
	// Mem is the task's measured memory in bytes (schema 1.5's
	// memoryInBytes, the older "memory" in KiB), 0 where the trace does
	// not say.
	Mem     int64
	Inputs  []string
	Outputs []string
}

// document covers both shapes; absent parts stay zero.
type document struct {
	Name          string          `json:"name"`
	SchemaVersion json.RawMessage `json:"schemaVersion"` // a string; a number is tolerated
	Workflow      struct {
		Specification struct {
			Tasks []struct {
				ID          string   `json:"id"`
				Name        string   `json:"name"`
				Parents     []string `json:"parents"`
				Children    []string `json:"children"`
				InputFiles  []string `json:"inputFiles"`
				OutputFiles []string `json:"outputFiles"`
			} `json:"tasks"`
			Files []struct {
				ID   string `json:"id"`
				Size *int64 `json:"sizeInBytes"`
			} `json:"files"`
		} `json:"specification"`
		Execution struct {
			Makespan float64 `json:"makespanInSeconds"`
			Tasks    []struct {
				ID        string   `json:"id"`
				Runtime   *float64 `json:"runtimeInSeconds"`
				CoreCount int      `json:"coreCount"`
				Memory    *float64 `json:"memoryInBytes"`
			} `json:"tasks"`
		} `json:"execution"`
		// Schema 1.3/1.4.
		Makespan float64 `json:"makespan"`
		Tasks    []struct {
			ID             string   `json:"id"`
			Name           string   `json:"name"`
			Parents        []string `json:"parents"`
			Children       []string `json:"children"`
			Runtime        *float64 `json:"runtime"`
			RuntimeSeconds *float64 `json:"runtimeInSeconds"`
			Cores          int      `json:"cores"`
			Memory         *float64 `json:"memory"` // KiB
			Files          []struct {
				Link        string `json:"link"`
				Name        string `json:"name"`
				ID          string `json:"id"`
				Size        *int64 `json:"size"`
				SizeInBytes *int64 `json:"sizeInBytes"`
			} `json:"files"`
		} `json:"tasks"`
	} `json:"workflow"`
}

// Read parses a WfFormat document.
func Read(r io.Reader) (*Workflow, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("wfformat: %w", err)
	}
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("wfformat: document larger than %d MiB", MaxBytes>>20)
	}
	var doc document
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("wfformat: %w", jsonError(err))
	}
	if err := checkVersion(doc.SchemaVersion); err != nil {
		return nil, err
	}
	w := &Workflow{Name: doc.Name, FileSizes: map[string]int64{}}
	var tasks []Task
	children := map[string][]string{} // parent -> children, from "children" lists
	if len(doc.Workflow.Specification.Tasks) > 0 {
		tasks, err = doc.specTasks(w.FileSizes, children)
		w.Makespan = doc.Workflow.Execution.Makespan
	} else {
		tasks, err = doc.flatTasks(w.FileSizes, children)
		w.Makespan = doc.Workflow.Makespan
	}
	if err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return nil, errors.New("wfformat: no tasks (neither workflow.specification.tasks nor workflow.tasks)")
	}
	for name, size := range w.FileSizes {
		if size < 0 {
			return nil, fmt.Errorf("wfformat: file %q has size %d", name, size)
		}
	}
	byID, err := indexTasks(tasks)
	if err != nil {
		return nil, err
	}
	if err := linkParents(tasks, byID, children); err != nil {
		return nil, err
	}
	order, err := topoOrder(tasks, byID)
	if err != nil {
		return nil, err
	}
	w.Tasks = make([]Task, len(tasks))
	for i, j := range order {
		w.Tasks[i] = tasks[j]
	}
	return w, nil
}

// checkVersion refuses a schemaVersion this reader does not know: the
// 1.x shapes are read (absent is taken as one of them); another major
// version may keep its tasks elsewhere, and reading it as 1.x would
// fail later with a misleading error, or not at all.
func checkVersion(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	v := strings.Trim(string(raw), `"`)
	if v == "1" || strings.HasPrefix(v, "1.") {
		return nil
	}
	if len(v) > 20 {
		v = v[:20] + "..."
	}
	return fmt.Errorf("wfformat: schemaVersion %q is not supported: this reader knows WfFormat 1.x", v)
}

// jsonError says what is wrong with a document encoding/json refused, in
// the document's terms: where it stops being JSON, or which field has
// the wrong kind of value (not the Go type it was to fill).
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("not JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "the document"
		}
		return fmt.Errorf("%s is a JSON %s, want %s", field, te.Value, jsonKind(te.Type))
	}
	return err
}

// jsonKind names the JSON value a Go type is read from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another kind of value"
}

// specTasks reads the tasks of a schema 1.5 document (the DAG in
// workflow.specification, runtimes in workflow.execution), adding file
// sizes to sizes and each task's "children" list to children.
func (doc *document) specTasks(sizes map[string]int64, children map[string][]string) ([]Task, error) {
	spec := doc.Workflow.Specification
	var tasks []Task
	if len(spec.Tasks) > MaxTasks {
		return nil, fmt.Errorf("wfformat: %d tasks; the limit is %d", len(spec.Tasks), MaxTasks)
	}
	for _, f := range spec.Files {
		if f.Size != nil {
			sizes[f.ID] = *f.Size
		}
	}
	exec := map[string]int{}
	for i, t := range doc.Workflow.Execution.Tasks {
		exec[t.ID] = i
	}
	for n, st := range spec.Tasks {
		if st.ID == "" {
			return nil, fmt.Errorf("wfformat: task %d of workflow.specification.tasks has no id", n+1)
		}
		t := Task{ID: st.ID, Name: st.Name, Parents: st.Parents, Inputs: st.InputFiles, Outputs: st.OutputFiles, Cores: 1}
		i, ok := exec[st.ID]
		if !ok || doc.Workflow.Execution.Tasks[i].Runtime == nil {
			return nil, fmt.Errorf("wfformat: task %q has no runtimeInSeconds in workflow.execution", st.ID)
		}
		et := doc.Workflow.Execution.Tasks[i]
		t.Runtime = *et.Runtime
		var err error
		if t.Cores, err = cores(st.ID, et.CoreCount); err != nil {
			return nil, err
		}
		mem, err := memBytes(st.ID, et.Memory, 1)
		if err != nil {
			return nil, err
		}
		t.Mem = mem
		for _, c := range st.Children {
			children[st.ID] = append(children[st.ID], c)
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// flatTasks reads the tasks of a schema 1.3/1.4 document (workflow.tasks
// with their files), adding file sizes to sizes and each task's
// "children" list to children.
func (doc *document) flatTasks(sizes map[string]int64, children map[string][]string) ([]Task, error) {
	var tasks []Task
	if len(doc.Workflow.Tasks) > MaxTasks {
		return nil, fmt.Errorf("wfformat: %d tasks; the limit is %d", len(doc.Workflow.Tasks), MaxTasks)
	}
	for _, ot := range doc.Workflow.Tasks {
		id := ot.ID
		if id == "" {
			id = ot.Name
		}
		t := Task{ID: id, Name: ot.Name, Parents: ot.Parents}
		var err error
		if t.Cores, err = cores(id, ot.Cores); err != nil {
			return nil, err
		}
		mem, err := memBytes(id, ot.Memory, 1024)
		if err != nil {
			return nil, err
		}
		t.Mem = mem
		switch {
		case ot.RuntimeSeconds != nil:
			t.Runtime = *ot.RuntimeSeconds
		case ot.Runtime != nil:
			t.Runtime = *ot.Runtime
		default:
			return nil, fmt.Errorf("wfformat: task %q has no runtime", id)
		}
		for _, f := range ot.Files {
			name := f.Name
			if name == "" {
				name = f.ID
			}
			switch f.Link {
			case "input":
				t.Inputs = append(t.Inputs, name)
			case "output":
				t.Outputs = append(t.Outputs, name)
			default:
				return nil, fmt.Errorf("wfformat: task %q: file %q has link %q, want input or output", id, name, f.Link)
			}
			if f.SizeInBytes != nil {
				sizes[name] = *f.SizeInBytes
			} else if f.Size != nil {
				sizes[name] = *f.Size
			}
		}
		for _, c := range ot.Children {
			children[id] = append(children[id], c)
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// MaxMem bounds a task's memory: past it (1 PiB, what a job may ask
// for) the trace is broken, not a workload.
const MaxMem = 1 << 50

// memBytes is a task's memory, v units of unit bytes, as whole bytes
// rounded up; absent is 0.
func memBytes(id string, v *float64, unit float64) (int64, error) {
	if v == nil {
		return 0, nil
	}
	b := math.Ceil(*v * unit)
	if math.IsNaN(b) || b < 0 || b > MaxMem {
		return 0, fmt.Errorf("wfformat: task %q has memory %v bytes, want 0..%d", id, b, int64(MaxMem))
	}
	return int64(b), nil
}

// MaxCores bounds a task's cores: past it (what a job may ask for,
// resource.MaxCPUs) the trace is broken, not a workload.
const MaxCores = 1 << 16

// cores is task id's cores from the trace's count n: 1 when it gives none
// (0), an error when it gives fewer or more than MaxCores.
func cores(id string, n int) (int, error) {
	if n < 0 || n > MaxCores {
		return 0, fmt.Errorf("wfformat: task %q has %d cores, want 1..%d (or none given)", id, n, MaxCores)
	}
	return max(n, 1), nil
}

// indexTasks checks each task's id and runtime and maps ids to indexes.
func indexTasks(tasks []Task) (map[string]int, error) {
	byID := make(map[string]int, len(tasks))
	for i, t := range tasks {
		if t.ID == "" {
			return nil, fmt.Errorf("wfformat: task %d has no id", i+1)
		}
		if _, dup := byID[t.ID]; dup {
			return nil, fmt.Errorf("wfformat: task id %q appears twice", t.ID)
		}
		if math.IsNaN(t.Runtime) || t.Runtime < 0 || t.Runtime > MaxRuntime {
			return nil, fmt.Errorf("wfformat: task %q has runtime %v s, want 0..%g", t.ID, t.Runtime, float64(MaxRuntime))
		}
		byID[t.ID] = i
	}
	return byID, nil
}

// linkParents makes each task's parents the union of its own list and
// every task naming it as a child (instances fill one list, the other,
// or both), without duplicates, and checks that they exist.
func linkParents(tasks []Task, byID map[string]int, children map[string][]string) error {
	for p, cs := range children {
		for _, c := range cs {
			i, ok := byID[c]
			if !ok {
				return fmt.Errorf("wfformat: task %q names unknown child %q", p, c)
			}
			tasks[i].Parents = append(tasks[i].Parents, p)
		}
	}
	seen := map[string]bool{}
	for i := range tasks {
		clear(seen)
		ps := tasks[i].Parents[:0:0]
		for _, p := range tasks[i].Parents {
			if !seen[p] {
				seen[p] = true
				ps = append(ps, p)
			}
		}
		tasks[i].Parents = ps
	}
	for _, t := range tasks {
		for _, p := range t.Parents {
			if _, ok := byID[p]; !ok {
				return fmt.Errorf("wfformat: task %q names unknown parent %q", t.ID, p)
			}
			if p == t.ID {
				return fmt.Errorf("wfformat: task %q is its own parent", t.ID)
			}
		}
	}
	return nil
}

// topoOrder returns task indexes with every task after its parents, in
// the file's order where the DAG allows (Kahn's algorithm, FIFO).
func topoOrder(tasks []Task, byID map[string]int) ([]int, error) {
	pending := make([]int, len(tasks))
	kids := make([][]int, len(tasks))
	for i, t := range tasks { // Parents are deduplicated
		for _, p := range t.Parents {
			pending[i]++
			kids[byID[p]] = append(kids[byID[p]], i)
		}
	}
	order := make([]int, 0, len(tasks))
	for i := range tasks {
		if pending[i] == 0 {
			order = append(order, i)
		}
	}
	for k := 0; k < len(order); k++ {
		for _, c := range kids[order[k]] {
			if pending[c]--; pending[c] == 0 {
				order = append(order, c)
			}
		}
	}
	if len(order) != len(tasks) {
		for i := range tasks {
			if pending[i] > 0 {
				return nil, fmt.Errorf("wfformat: the tasks' dependencies form a cycle through %q", tasks[i].ID)
			}
		}
	}
	return order, nil
}

// CriticalPath is the longest chain of runtimes from a source to a sink:
// no schedule, on any number of slots, finishes sooner.
func (w *Workflow) CriticalPath() float64 {
	finish := make(map[string]float64, len(w.Tasks))
	var longest float64
	for _, t := range w.Tasks { // topological: parents are done
		start := 0.0
		for _, p := range t.Parents {
			start = max(start, finish[p])
		}
		finish[t.ID] = start + t.Runtime
		longest = max(longest, finish[t.ID])
	}
	return longest
}

// Work is the sum of every task's runtime times its cores: no schedule on
// n one-core slots finishes sooner than Work/n.
func (w *Workflow) Work() float64 {
	var sum float64
	for _, t := range w.Tasks {
		sum += t.Runtime * float64(max(t.Cores, 1))
	}
	return sum
}

// LowerBound is the makespan no schedule on slots one-core slots beats:
// max(critical path, work/slots).
func (w *Workflow) LowerBound(slots int) float64 {
	return max(w.CriticalPath(), w.Work()/float64(max(slots, 1)))
}
