//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPipelineDAG submits 500 PA-style pipelines (a BLAST-like job, then a
// Parse-like job that reads the BLAST job's output) as one `mqsub -f` file
// of 1,000 jobs and checks that all end Done, in dependency order, with each
// parse having read what its blast wrote.
func TestPipelineDAG(t *testing.T) {
	const proteins = 500
	h := newHarness(t)
	h.startCLS("--local", "4", "--lease", "10s")

	var sb strings.Builder
	for n := 0; n < proteins; n++ {
		blast := fmt.Sprintf(`{"target":"p%d_blast","command":"echo \"blast %d job $MQ_JOB_ID\" > out_%d","queue":"pa","est":2.5}`, n, n, n)
		// The parse fails (exit 9) if the blast output is not there yet.
		parse := fmt.Sprintf(`{"target":"p%d_parse","prereqs":["p%d_blast"],"command":"test -s out_%d || exit 9; read l < out_%d && echo \"parsed: $l\" > parsed_%d","queue":"pa"}`, n, n, n, n, n)
		// Half the pipelines list the parse first: a prerequisite target may
		// appear later in the same file.
		if n%2 == 1 {
			blast, parse = parse, blast
		}
		sb.WriteString(blast + "\n" + parse + "\n")
	}
	file := filepath.Join(h.dir, "pa.jsonl")
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := h.ok("mqsub", "-f", file)
	ids := strings.Fields(out)
	if len(ids) != 2*proteins {
		t.Fatalf("mqsub -f printed %d ids, want %d", len(ids), 2*proteins)
	}
	first, _ := strconv.ParseInt(ids[0], 10, 64)
	for i, s := range ids {
		if id, err := strconv.ParseInt(s, 10, 64); err != nil || id != first+int64(i) {
			t.Fatalf("mqsub -f id %d is %q, want %d (ids in file order)", i, s, first+int64(i))
		}
	}

	waitFor(t, 90*time.Second, func() error {
		c := h.summary()["pa"]
		if c["F"]+c["B"]+c["X"] > 0 {
			t.Fatalf("jobs failed or blocked: %v", c)
		}
		if c["D"] == 2*proteins {
			return nil
		}
		return fmt.Errorf("queue pa: %v", c)
	})
	t.Logf("%d jobs done in %v", 2*proteins, time.Since(start).Round(time.Millisecond))

	jobs := h.jobs("-q", "pa")
	if len(jobs) != 2*proteins {
		t.Fatalf("mqstat -q pa lists %d jobs, want %d", len(jobs), 2*proteins)
	}
	byTarget := map[string]jobInfo{}
	for _, j := range jobs {
		if j.State != "D" || j.Exit == nil || *j.Exit != 0 {
			t.Errorf("job %d (%s) is %s exit %v, want D exit 0", j.ID, j.Target, j.State, j.Exit)
		}
		if _, dup := byTarget[j.Target]; dup {
			t.Errorf("two jobs in target %s", j.Target)
		}
		byTarget[j.Target] = j
	}
	for n := 0; n < proteins; n++ {
		b, okb := byTarget[fmt.Sprintf("p%d_blast", n)]
		p, okp := byTarget[fmt.Sprintf("p%d_parse", n)]
		if !okb || !okp {
			t.Fatalf("pipeline %d: missing jobs (blast %v, parse %v)", n, okb, okp)
		}
		if b.Est != 2.5 {
			t.Errorf("p%d_blast: est %v, want 2.5", n, b.Est)
		}
		if len(p.Prereqs) != 1 || p.Prereqs[0] != b.Target {
			t.Errorf("p%d_parse: prereqs %v, want [%s]", n, p.Prereqs, b.Target)
		}
		bFin := parseTime(t, b.Target+" finished", b.Finished)
		pStart := parseTime(t, p.Target+" started", p.Started)
		if pStart.Before(bFin) {
			t.Errorf("pipeline %d: parse started %s before blast finished %s", n, p.Started, b.Finished)
		}
		blastOut := readFile(t, filepath.Join(h.dir, fmt.Sprintf("out_%d", n)))
		wantBlast := fmt.Sprintf("blast %d job %d\n", n, b.ID)
		if blastOut != wantBlast {
			t.Errorf("out_%d = %q, want %q", n, blastOut, wantBlast)
		}
		parsed := readFile(t, filepath.Join(h.dir, fmt.Sprintf("parsed_%d", n)))
		if parsed != "parsed: "+wantBlast {
			t.Errorf("parsed_%d = %q, want %q", n, parsed, "parsed: "+wantBlast)
		}
	}
}

// TestLatePrerequisite: a job whose prerequisite target has no jobs yet
// waits (W), says why, and runs once the prerequisite job is added and done.
func TestLatePrerequisite(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")

	dep := h.submit("-p", "later", "consumer", "cat later.out > consumer.out")
	// Give the CLS time to (wrongly) start it.
	time.Sleep(500 * time.Millisecond)
	d := h.job(dep)
	if d.State != "W" {
		t.Fatalf("job with a prerequisite target that has no jobs is %s, want W", d.State)
	}
	if len(d.WaitingOn) != 1 || d.WaitingOn[0].Target != "later" || d.WaitingOn[0].Complete || len(d.WaitingOn[0].Counts) != 0 && sum(d.WaitingOn[0].Counts) != 0 {
		t.Errorf("mqstat -j --json waiting_on = %+v, want target later, not complete, no jobs", d.WaitingOn)
	}
	text := h.ok("mqstat", "-j", strconv.FormatInt(dep, 10))
	if !strings.Contains(text, "later") || !strings.Contains(text, "no jobs") {
		t.Errorf("mqstat -j does not say the job waits for a target with no jobs:\n%s", text)
	}
	if row := h.ok("mqstat", "-t", "consumer"); !strings.Contains(row, " W ") {
		t.Errorf("mqstat -t consumer does not show W:\n%s", row)
	}

	pre := h.submit("later", "echo made-later > later.out")
	h.waitState(pre, "D", 20*time.Second)
	dd := h.waitState(dep, "D", 20*time.Second)
	if got := readFile(t, filepath.Join(h.dir, "consumer.out")); got != "made-later\n" {
		t.Errorf("consumer.out = %q, want %q", got, "made-later\n")
	}
	pd := h.job(pre)
	if parseTime(t, "consumer started", dd.Started).Before(parseTime(t, "later finished", pd.Finished)) {
		t.Errorf("consumer started %s before its prerequisite finished %s", dd.Started, pd.Finished)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
