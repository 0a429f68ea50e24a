package placeholder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

func TestUnits(t *testing.T) {
	t.Parallel()
	a := func(id, b int64) protocol.Assignment { return protocol.Assignment{ID: id, Bundle: b} }
	got := units([]protocol.Assignment{a(1, 0), a(5, 5), a(6, 5), a(7, 5), a(2, 0), a(9, 9), a(10, 9), a(3, 0)})
	want := "[[1] [5 6 7] [2] [9 10] [3]]"
	var s []string
	for _, u := range got {
		var ids []string
		for _, x := range u {
			ids = append(ids, strconv.FormatInt(x.ID, 10))
		}
		s = append(s, "["+strings.Join(ids, " ")+"]")
	}
	if "["+strings.Join(s, " ")+"]" != want {
		t.Errorf("units = %v, want %s", s, want)
	}
}

// TestAgentRunsBundleInOneSlot: a bundle's jobs run one after another, in
// order, in one slot, while the other slot runs a loose job alongside; each
// keeps its own exit status and output.
func TestAgentRunsBundleInOneSlot(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	// awaitStart waits (up to 60 s) until the job named has started: the
	// bundle's first job and the loose job each wait for the other, so
	// they overlap however slowly this machine starts them, if and only if
	// they run side by side.
	awaitStart := func(name string) string {
		return fmt.Sprintf(`i=0; until grep -q "^start %s " log || [ $i -ge 600 ]; do sleep 0.1; i=$((i+1)); done; `, name)
	}
	step := func(name string, code int) protocol.JobSpec {
		wait := ""
		if name == "a" {
			wait = awaitStart("loose")
		}
		return protocol.JobSpec{Target: "b", Cwd: dir, Command: fmt.Sprintf(
			`echo "start %s $(date +%%s.%%N)" >> log; %ssleep 0.15; echo "end %s $(date +%%s.%%N)" >> log; echo out-%s; exit %d`, name, wait, name, name, code)}
	}
	loose := c.submit(protocol.JobSpec{Target: "l", Cwd: dir, Command: `echo "start loose $(date +%s.%N)" >> log; ` + awaitStart("a") + `sleep 0.15; echo "end loose $(date +%s.%N)" >> log`})
	b, err := c.store.SubmitRequest(context.Background(), protocol.Submit{Bundle: true, Jobs: []protocol.JobSpec{step("a", 0), step("b", 4), step("c", 0)}})
	if err != nil {
		t.Fatal(err)
	}
	_, out := startAgent(t, c, 2)
	ends := c.wait(append(b, loose...)...)
	for i, code := range []int{0, 4, 0} {
		e := ends[b[i]]
		if e.Exit == nil || *e.Exit != code {
			t.Errorf("bundle job %d: %+v, want exit %d", i, e, code)
		}
		stdout, _ := job.OutputPaths(out, b[i], 1)
		got, err := os.ReadFile(stdout)
		if err != nil || string(got) != fmt.Sprintf("out-%c\n", 'a'+i) {
			t.Errorf("bundle job %d stdout %q, %v", i, got, err)
		}
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ start, end float64 }
	spans := map[string]*span{}
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[2], 64)
		if spans[f[1]] == nil {
			spans[f[1]] = &span{}
		}
		if f[0] == "start" {
			spans[f[1]].start = v
			if f[1] != "loose" {
				order = append(order, f[1])
			}
		} else {
			spans[f[1]].end = v
		}
	}
	if strings.Join(order, "") != "abc" {
		t.Errorf("bundle ran in order %v, want a b c", order)
	}
	if !(spans["a"].end <= spans["b"].start && spans["b"].end <= spans["c"].start) {
		t.Errorf("bundle jobs overlapped: %+v %+v %+v", *spans["a"], *spans["b"], *spans["c"])
	}
	// The loose job ran in the other slot, during the bundle.
	if !(spans["loose"].start < spans["a"].end && spans["a"].start < spans["loose"].end) {
		t.Errorf("loose job %+v did not run alongside the bundle (a %+v, b %+v)", *spans["loose"], *spans["a"], *spans["b"])
	}
	// Each job has its own times.
	for _, id := range b {
		d, err := c.store.Inspect().Job(context.Background(), id)
		if err != nil || d.Started == "" || d.Finished == "" {
			t.Errorf("job %d: %+v %v", id, d, err)
		}
	}
}

// TestAgentSkipsDeletedBundleJob: a job of a bundle deleted while it waits
// for its turn is not run; the rest of the bundle is.
func TestAgentSkipsDeletedBundleJob(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	b, err := c.store.SubmitRequest(context.Background(), protocol.Submit{Bundle: true, Jobs: []protocol.JobSpec{
		{Target: "b", Cwd: dir, Command: "sleep 2.5; touch a"},
		{Target: "b", Cwd: dir, Command: "touch b"},
		{Target: "b", Cwd: dir, Command: "touch c"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, c, 1)
	deadline := time.Now().Add(10 * time.Second)
	for stateOf(t, c, b[0]) != "E" {
		if time.Now().After(deadline) {
			t.Fatal("bundle never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.store.Delete(context.Background(), protocol.Select{IDs: []int64{b[1]}}); err != nil {
		t.Fatal(err)
	}
	ends := c.wait(b...)
	if ends[b[1]].State != "X" || ends[b[0]].State != "D" || ends[b[2]].State != "D" {
		t.Fatalf("ends %+v", ends)
	}
	for name, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("file %s exists=%v, want %v", name, err == nil, want)
		}
	}
}

// TestBundleJobsCarryUsage: each job of a bundle is reported with its own
// rusage, kept per job by the CLS.
func TestBundleJobsCarryUsage(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	jobs := []protocol.JobSpec{
		{Target: "u", Cwd: dir, Command: "true"},
		// Bigger than the test process: on Linux a child's max RSS starts
		// at its parent's size at fork (tens of MB for a test binary).
		{Target: "u", Cwd: dir, Command: "dd if=/dev/zero of=/dev/null bs=300M count=1 2>/dev/null"},
	}
	ids, err := c.store.SubmitRequest(context.Background(), protocol.Submit{Bundle: true, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, c, 1)
	for id, e := range c.wait(ids...) {
		if e.State != "D" {
			t.Fatalf("job %d: %+v", id, e)
		}
	}
	var rss [2]int64
	for i, id := range ids {
		d, err := c.store.Inspect().Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Measured() {
			t.Fatalf("bundle job %d has no usage: %+v", i, d.Accounting)
		}
		rss[i] = d.MaxRSS
	}
	if rss[1] < 300e6 || rss[0] >= rss[1] {
		t.Fatalf("max RSS per bundle job %v: want each its own (300 MB and more for the second)", rss)
	}
}
