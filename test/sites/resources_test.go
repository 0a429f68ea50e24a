//go:build e2e

package sites

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A site of 2-core, 1 GiB placeholders on the real batch systems: the
// batch script asks for the cores and the memory in the system's own
// terms (read back from scontrol, qstat -f, qstat -j), the agent offers
// what it was given (cls site list), and a 2-core job sees MQ_CPUS=2.
func TestResourcesAskedAndGiven(t *testing.T) {
	for _, tc := range []struct {
		typ, show string
		want      []string // regular expressions the batch system's view matches
	}{
		{"slurm", "scontrol show job %s", []string{`NumCPUs=2\b`, `MinMemoryNode=1G\b`}},
		{"pbs", "qstat -f %s", []string{`Resource_List\.ncpus = 2\b`, `Resource_List\.mem = 1024mb\b`}},
		{"sge", "qstat -j %s", []string{`parallel environment: +smp range: +2\b`, `mem_free=512M\b`}},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			need(t, tc.typ)
			l := loginFor(t, tc.typ)
			var c *cls
			if tc.typ == "pbs" {
				c = startCLSWith(t, nil, reachableFromPBS())
			} else {
				c = startCLS(t)
			}
			site := "r" + tc.typ
			c.addSite(site, tc.typ, l, "--cpus", "2", "--mem", "1G", "--max", "1", "--walltime", "10m", "--idle", "3s")
			gate, seen := filepath.Join(c.work, "gate"), filepath.Join(c.work, "seen")
			c.must("mqsub", "-q", "q", "--cpus", "2", "--mem", "512M", "two",
				fmt.Sprintf("echo cpus=$MQ_CPUS omp=$OMP_NUM_THREADS > %s; while [ ! -e %s ]; do sleep 0.2; done", seen, gate))
			eventually(t, 2*time.Minute, "the job executing", func() bool { return len(c.jobs("E")) == 1 })
			ids := batchIDs(t, tc.typ, "mq-"+site+"-")
			if len(ids) != 1 {
				t.Fatalf("placeholders in the batch queue: %q", ids)
			}
			out := asUserOf(t, tc.typ, fmt.Sprintf(tc.show, ids[0]))
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(out) {
					t.Errorf("%s does not match %s:\n%s", fmt.Sprintf(tc.show, ids[0]), w, tail(out, 3000))
				}
			}
			s := c.sites()[site]
			if !strings.Contains(s.Offered, "cpus=2") || !strings.Contains(s.Offered, "mem=1 GiB") {
				t.Errorf("the placeholder offers %q (given %q), want cpus=2 and mem=1 GiB", s.Offered, s.Given)
			}
			t.Logf("offered %q, given %q", s.Offered, s.Given)
			eventually(t, time.Minute, "the job's note", func() bool { _, err := os.Stat(seen); return err == nil })
			if b, _ := os.ReadFile(seen); strings.TrimSpace(string(b)) != "cpus=2 omp=2" {
				t.Errorf("the job saw %q, want cpus=2 omp=2", b)
			}
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			eventually(t, time.Minute, "the job done", func() bool { return len(c.jobs("D")) == 1 })
		})
	}
}
