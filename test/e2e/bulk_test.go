//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBulkSelectorsEnvArrays: mqdel and mqsub --rerun select by queue,
// target, states, a range or all, all or none, a line per job unless -Q;
// -v and a job file's "env" reach the job (-v with -f every job of the
// file, the line's "env" winning); --array submits one job per
// index with MQ_ARRAY_INDEX and {}.
func TestBulkSelectorsEnvArrays(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")

	// Per-job environment, from the command line and a job file.
	out := filepath.Join(h.dir, "env.txt")
	r := h.run("mqsub", "-b", "-v", "GREETING=hello, world", "-v", "N=2", "e", fmt.Sprintf(`echo "$GREETING $N" > %s`, out))
	if r.code != 0 || readFile(t, out) != "hello, world 2\n" {
		t.Fatalf("mqsub -v: %s; file %q", r, readFile(t, out))
	}
	file := filepath.Join(h.dir, "jobs.jsonl")
	os.WriteFile(file, []byte(fmt.Sprintf(`{"target":"e2","command":"echo $X > %s","env":{"X":"from-file"}}`+"\n", out)), 0o644)
	if r = h.run("mqsub", "-b", "-f", file); r.code != 0 || readFile(t, out) != "from-file\n" {
		t.Fatalf("mqsub -f with env: %s; file %q", r, readFile(t, out))
	}
	// -v with -f: every job of the file, a line's own "env" winning.
	lines := fmt.Sprintf(`{"target":"e3","command":"echo \"$X $Y\" > %[1]s/v1.txt"}`+"\n"+
		`{"target":"e3","command":"echo \"$X $Y\" > %[1]s/v2.txt","env":{"X":"own"}}`+"\n", h.dir)
	os.WriteFile(file, []byte(lines), 0o644)
	if r = h.run("mqsub", "-b", "-v", "X=cli", "-v", "Y=both", "-f", file); r.code != 0 {
		t.Fatalf("mqsub -v -f: %s", r)
	}
	if v1, v2 := readFile(t, filepath.Join(h.dir, "v1.txt")), readFile(t, filepath.Join(h.dir, "v2.txt")); v1 != "cli both\n" || v2 != "own both\n" {
		t.Fatalf("mqsub -v -f: jobs saw %q and %q, want \"cli both\" and \"own both\"", v1, v2)
	}
	if r = h.run("mqsub", "-v", "MQ_TARGET=x", "-f", file); r.code != 2 || r.stdout != "" {
		t.Fatalf("mqsub -v MQ_TARGET=x -f: %s, want a usage error and no jobs", r)
	}
	for _, bad := range []string{"1X=a", "MQ_JOB_ID=3", "novalue"} {
		if r = h.run("mqsub", "-v", bad, "e", "true"); r.code != 2 {
			t.Fatalf("mqsub -v %s: %s, want usage error", bad, r)
		}
	}

	// An array: ids printed, {} and MQ_ARRAY_INDEX per member.
	r = h.run("mqsub", "-b", "--array", "2-6:2", "arr", fmt.Sprintf(`echo "{} $MQ_ARRAY_INDEX" > %s/arr-{}.txt`, h.dir))
	ids := strings.Fields(r.stdout)
	if r.code != 0 || len(ids) != 3 {
		t.Fatalf("mqsub --array: %s", r)
	}
	for _, i := range []string{"2", "4", "6"} {
		if got := readFile(t, filepath.Join(h.dir, "arr-"+i+".txt")); got != i+" "+i+"\n" {
			t.Fatalf("member %s wrote %q", i, got)
		}
	}
	for _, bad := range []string{"5-1", "1-10%0", "x", "1-3:0"} {
		if r = h.run("mqsub", "--array", bad, "a", "true"); r.code != 2 {
			t.Fatalf("mqsub --array %s: %s, want usage error", bad, r)
		}
	}
	// A failing member fails mqsub -b --array, naming it.
	r = h.run("mqsub", "-b", "--array", "1-3", "arr2", `test {} -ne 2`)
	if ids2 := strings.Fields(r.stdout); r.code != 1 || len(ids2) != 3 || !strings.Contains(r.stderr, "job "+ids2[1]+" failed") {
		t.Fatalf("mqsub -b --array with a failure: %s", r)
	}

	// Selectors. Jobs that wait forever (their prerequisite has no jobs).
	var w []string
	for i := 0; i < 3; i++ {
		w = append(w, fmt.Sprint(h.submit("-q", "sel", "-p", "never", "held", "true")))
	}
	other := fmt.Sprint(h.submit("-q", "sel2", "-p", "never", "held2", "true"))
	// Atomic: one done job among them: nothing is deleted, the culprit named.
	r = h.run("mqdel", w[0], ids[0], "999999")
	if r.code != 1 || !strings.Contains(r.stderr, "nothing deleted") || !strings.Contains(r.stderr, "job "+ids[0]+" has already ended (done)") || !strings.Contains(r.stderr, "job 999999 does not exist") {
		t.Fatalf("mqdel with culprits: %s", r)
	}
	if d := h.job(mustID(t, w[0])); d.State != "W" {
		t.Fatalf("job %s is %s after a refused mqdel", w[0], d.State)
	}
	// So is mqsub --rerun: the done job is not rerun beside a waiting one.
	r = h.run("mqsub", "--rerun", ids[0], w[0])
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "nothing rerun") || !strings.Contains(r.stderr, "job "+w[0]+" is waiting") {
		t.Fatalf("mqsub --rerun with a culprit: %s", r)
	}
	if d := h.job(mustID(t, ids[0])); d.State != "D" || d.Attempts != 1 {
		t.Fatalf("job %s is %s (attempts %d) after a refused rerun", ids[0], d.State, d.Attempts)
	}
	// -q selects; a line per deleted job.
	r = h.run("mqdel", "-q", "sel", "-s", "W")
	if r.code != 0 || r.stdout != fmt.Sprintf("deleted job %s\ndeleted job %s\ndeleted job %s\n", w[0], w[1], w[2]) {
		t.Fatalf("mqdel -q sel -s W: %s", r)
	}
	if d := h.job(mustID(t, other)); d.State != "W" {
		t.Fatalf("job %s of another queue is %s", other, d.State)
	}
	// Rerun by target and states, quietly; then delete a range.
	if r = h.run("mqsub", "--rerun", "-t", "held", "-s", "X", "-Q"); r.code != 0 || r.stdout != "" {
		t.Fatalf("mqsub --rerun -t held -s X -Q: %s", r)
	}
	for _, id := range w {
		if d := h.job(mustID(t, id)); d.State != "W" {
			t.Fatalf("job %s is %s after the rerun", id, d.State)
		}
	}
	if r = h.run("mqdel", w[0]+"-"+w[2]); r.code != 0 || strings.Count(r.stdout, "deleted job") != 3 {
		t.Fatalf("mqdel FIRST-LAST: %s", r)
	}
	if r = h.run("mqdel", "--all", "-Q"); r.code != 0 || r.stdout != "" {
		t.Fatalf("mqdel --all -Q: %s", r)
	}
	if d := h.job(mustID(t, other)); d.State != "X" {
		t.Fatalf("job %s is %s after mqdel --all", other, d.State)
	}
	// Rerun of failed jobs by state, everywhere.
	if r = h.run("mqsub", "--rerun", "--all", "-s", "F"); r.code != 0 || len(strings.Fields(r.stdout)) != 1 {
		t.Fatalf("mqsub --rerun --all -s F: %s", r)
	}
	for _, args := range [][]string{{}, {"-s", "D"}, {"1", "-t", "x"}, {"1-2", "3"}} {
		if r = h.run("mqdel", args...); r.code != 2 {
			t.Fatalf("mqdel %v: %s, want usage error", args, r)
		}
	}
}

// TestSSHAgentJobEnv: -v variables and MQ_ARRAY_INDEX reach a job run by
// a remote placeholder (cls agent over SSH), not only local ones.
func TestSSHAgentJobEnv(t *testing.T) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	ph := h.newKey("placeholder", "ph")
	a := s.startAgent(agentOpts{key: ph, site: "remote"})
	a.waitConnected(t, 1, time.Minute)
	r := h.run("mqsub", "-b", "-v", "WHO=remote agent", "--array", "3-4", "t", `echo "$WHO {} $MQ_ARRAY_INDEX" > env-{}.txt`)
	if r.code != 0 {
		t.Fatalf("mqsub -b -v --array: %s", r)
	}
	for _, i := range []string{"3", "4"} {
		if got := readFile(t, filepath.Join(h.dir, "env-"+i+".txt")); got != "remote agent "+i+" "+i+"\n" {
			t.Fatalf("member %s wrote %q", i, got)
		}
	}
	if d := h.job(mustID(t, strings.Fields(r.stdout)[0])); d.Site != "remote" {
		t.Fatalf("the job ran at site %q, not at the remote agent's", d.Site)
	}
}
