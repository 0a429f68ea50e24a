//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDeleteRunningJob: mqdel of an executing job kills its whole process
// group (its sleep 300 does not run on), the job ends X, its dependent
// becomes B, and `mqsub --rerun` brings the job back so the dependent runs.
func TestDeleteRunningJob(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")

	// Until "released" exists the job records its shell's pid (the process
	// group leader) and its background child's, then sleeps.
	id := h.submit("A", `if [ ! -e released ]; then echo $$ > pid; sleep 300 & echo $! > child; wait; fi; echo attempt $MQ_ATTEMPT > a.out`)
	dep := h.submit("-p", "A", "Bt", "echo dep-ran > dep.out")

	h.waitState(id, "E", 20*time.Second)
	waitFile(t, filepath.Join(h.dir, "child"), time.Minute)
	pgid := readPid(t, filepath.Join(h.dir, "pid"))
	child := readPid(t, filepath.Join(h.dir, "child"))
	if !alive(pgid) || !alive(child) {
		t.Fatalf("the job's processes are not running (shell %d alive %v, sleep %d alive %v)", pgid, alive(pgid), child, alive(child))
	}
	if st, _ := readStat(child); st.pgid != pgid {
		t.Fatalf("the job's child is in process group %d, want the job's own group %d", st.pgid, pgid)
	}

	start := time.Now()
	if r := h.run("mqdel", strconv.FormatInt(id, 10)); r.code != 0 || r.stderr != "" {
		t.Fatalf("mqdel %d: %s", id, r)
	}
	// Half the sleep 300 a group left alive would run on for.
	waitFor(t, 150*time.Second, func() error {
		if m := groupMembers(pgid); len(m) > 0 {
			return fmt.Errorf("process group %d still has %v %d ms after mqdel", pgid, m, time.Since(start).Milliseconds())
		}
		return nil
	})
	t.Logf("process group gone %v after mqdel", time.Since(start).Round(time.Millisecond))

	d := h.waitState(id, "X", time.Minute)
	if d.Finished == "" {
		t.Errorf("deleted job has no finish time")
	}
	bd := h.waitState(dep, "B", time.Minute)
	if len(bd.WaitingOn) != 1 || bd.WaitingOn[0].Counts["X"] != 1 {
		t.Errorf("blocked job's waiting_on = %+v, want target A with one deleted job", bd.WaitingOn)
	}
	// Deleted jobs are hidden from the default listing, the blocked one is not.
	var listed []jobInfo
	if err := json.Unmarshal([]byte(h.ok("mqstat", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].ID != dep || listed[0].State != "B" {
		t.Errorf("mqstat without -s lists %+v, want only the blocked job %d", listed, dep)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "dep.out")); err == nil {
		t.Fatalf("the dependent ran although its prerequisite was deleted")
	}

	// Rerun, this time letting the job finish.
	if err := os.WriteFile(filepath.Join(h.dir, "released"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := h.ok("mqsub", "--rerun", strconv.FormatInt(id, 10))
	if strings.TrimSpace(out) != strconv.FormatInt(id, 10) {
		t.Errorf("mqsub --rerun printed %q, want the job id %d", out, id)
	}
	d = h.waitState(id, "D", 20*time.Second)
	if d.Attempts < 2 {
		t.Errorf("rerun job shows %d attempts, want >= 2", d.Attempts)
	}
	h.waitState(dep, "D", 20*time.Second)
	if got := readFile(t, filepath.Join(h.dir, "dep.out")); got != "dep-ran\n" {
		t.Errorf("dep.out = %q", got)
	}
}
