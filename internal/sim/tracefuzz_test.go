package sim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/wfformat"
	"github.com/mq-hpc/mq/internal/wfreplay"
)

// FuzzTrace feeds WfFormat documents through everything that consumes
// them: the reader, the simulator's workload (every workflow policy, both
// staging modes, with and without resources) and the live replay's jobs.
// None may panic or hang; a run that completes respects the critical
// path and keeps its cores at most fully busy. The seed corpus is the
// reader's shapes and the smallest real trace.
func FuzzTrace(f *testing.F) {
	for _, doc := range []string{
		`{"schemaVersion":"1.5","workflow":{"specification":{"tasks":[{"id":"a","children":["b"],"outputFiles":["x"]},{"id":"b","inputFiles":["x","in"]}],"files":[{"id":"x","sizeInBytes":2000},{"id":"in","sizeInBytes":5}]},"execution":{"tasks":[{"id":"a","runtimeInSeconds":1,"coreCount":2},{"id":"b","runtimeInSeconds":0}]}}}`,
		`{"workflow":{"tasks":[{"name":"a","runtime":3,"files":[{"link":"output","name":"f","size":9}]},{"name":"b","parents":["a"],"runtime":1,"files":[{"link":"input","name":"f"}]}]}}`,
		`{"workflow":{"tasks":[{"name":"тест","runtime":0},{"name":"b🙂","parents":["тест"],"runtime":1e15}]}}`,
		`{"workflow":{"tasks":[{"name":"a","parents":["b"],"runtime":1},{"name":"b","parents":["a"],"runtime":1}]}}`,
	} {
		f.Add(doc)
	}
	if b, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "data", "wfinstances", "srasearch-chameleon-10a-001.json")); err == nil {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, doc string) {
		tr, err := wfformat.Read(strings.NewReader(doc))
		if err != nil {
			return
		}
		if _, err := wfreplay.New(tr, wfreplay.Options{TimeScale: 0.001, SizeScale: 0.001, Files: true, Est: true, Cores: true, Mem: true}); err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("replay error spans lines: %q", err)
		}
		w, err := TraceWorkload(tr)
		if err != nil {
			return
		}
		// Bound a run's virtual time: idle placeholders ask every turn.
		var bytes float64
		for _, b := range tr.FileSizes {
			bytes += float64(b)
		}
		if len(tr.Tasks) > 300 || tr.Work() > 1e4 || bytes > 1e9 {
			return
		}
		cp := tr.CriticalPath()
		caps := []resource.Capacity{{}, {CPUs: 4}}
		for _, pol := range WorkflowPolicies() {
			for _, staging := range StagingModes {
				for _, c := range caps {
					r, err := Run(w, LAN, Config{Policy: pol, Placeholders: 3, Seed: 1, Staging: staging, Capacity: c})
					if errors.Is(err, ErrNeverRuns) {
						continue
					}
					if err != nil {
						t.Fatalf("%s/%s/%v: %v", pol, staging, c, err)
					}
					if r.Makespan < cp*(1-1e-9) || r.CoreUtil > 1+1e-9 {
						t.Fatalf("%s/%s/%v: makespan %g below the critical path %g, or core_util %g", pol, staging, c, r.Makespan, cp, r.CoreUtil)
					}
				}
			}
		}
	})
}
