//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAlter drives the mqalter binary as a user would: held jobs get a
// new time limit, priority and memory, which mqstat -j shows and a CLS
// killed with SIGKILL keeps; released, one runs with its new limit, the
// other, asking more memory than the site's placeholder holds, waits
// saying why until mqalter lowers it. Ended jobs and bad values are
// refused with one line, nothing changed.
func TestAlter(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	h.ok("cls", "site", "add", "m", "--type", "local", "--max", "1", "--cpus", "2", "--mem", "1G", "--idle", "30s")

	a := h.submit("-H", "--mem", "100M", "A", `echo "$MQ_TIME_LIMIT" > a.out`)
	big := h.submit("-H", "--mem", "100M", "B", "true")
	sa, sbig := strconv.FormatInt(a, 10), strconv.FormatInt(big, 10)
	if out := h.ok("mqalter", "--time", "90", "--priority", "5", sa); out != "changed job "+sa+"\n" {
		t.Fatalf("mqalter printed %q", out)
	}
	if out := h.ok("mqalter", sbig, "--mem", "4G", "-Q"); out != "" {
		t.Fatalf("mqalter -Q printed %q", out)
	}
	// mqstat -j shows the new values, before and after a SIGKILL of the CLS.
	for round := range 2 {
		out := h.ok("mqstat", "-j", sa)
		for _, want := range []string{"state:", "H (held)", "priority:", " 5\n", "estimate:", "time limit:", "90s", "mem=100 MiB"} {
			if !strings.Contains(out, want) {
				t.Fatalf("round %d: mqstat -j %d lacks %q:\n%s", round, a, want, out)
			}
		}
		if out := h.ok("mqstat", "-j", sbig); !strings.Contains(out, "mem=4 GiB") {
			t.Fatalf("round %d: mqstat -j %d:\n%s", round, big, out)
		}
		if round == 0 {
			h.stopCLS(syscall.SIGKILL, time.Minute)
			h.startCLS("--local", "0")
		}
	}

	h.ok("mqrls", sa, sbig)
	if d := h.waitState(a, "DF", 2*time.Minute); d.State != "D" {
		t.Fatalf("job %d ended %s: %s", a, d.State, d.Reason)
	}
	waitFile(t, filepath.Join(h.dir, "a.out"), 30*time.Second)
	if got := strings.TrimSpace(readFile(t, filepath.Join(h.dir, "a.out"))); got != "90" {
		t.Fatalf("the job ran with MQ_TIME_LIMIT=%q, want 90", got)
	}
	waitFor(t, time.Minute, func() error {
		if out := h.ok("mqstat", "-j", sbig); !strings.Contains(out, "cannot run:") {
			return fmt.Errorf("job %d does not say why it cannot run:\n%s", big, out)
		}
		return nil
	})
	if d := h.job(big); d.State != "Q" {
		t.Fatalf("job %d asking 4 GiB of a 1 GiB site is %s, want Q", big, d.State)
	}

	// Refusals: an ended job (all or none), a bad value (usage, exit 2).
	r := h.run("mqalter", "--priority", "1", sa, sbig)
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "nothing changed: job "+sa+" has already ended (done)") {
		t.Fatalf("mqalter of a done and a queued job: %s", r)
	}
	for _, bad := range [][]string{{"--priority", "5000"}, {"--mem", "8X"}, {"--time", "0"}, {"-c", "0"}, {}} {
		r := h.run("mqalter", append(bad, sbig)...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("mqalter %v: %s", bad, r)
		}
	}
	if out := h.ok("mqstat", "-j", sbig); strings.Contains(out, "priority:") {
		t.Fatalf("a refused mqalter changed job %d:\n%s", big, out)
	}

	h.ok("mqalter", "--mem", "200M", "-t", "B")
	if d := h.waitState(big, "DF", 2*time.Minute); d.State != "D" {
		t.Fatalf("job %d ended %s: %s", big, d.State, d.Reason)
	}
}

// TestAlterResourcesAndChains drives mqalter through what it could not do
// before, as a user would. In two cp queues, the same chains, their
// dependents held: one submitted with a dependent's old estimate and then
// altered, the other with the new one; their heads run in the same order
// (the altered chain's b-levels recomputed). A job asking for a GPU and
// amounts the site lacks has the GPU dropped (--gpus 0), an amount
// lowered, one dropped (NAME=0) and an undeclared one added, which it then
// waits for, saying why, until that is dropped too: it runs. An array's
// members and the whole array are changed; a running job is refused in
// one line; bad names and amounts are refused in one line, exit 2.
func TestAlterResourcesAndChains(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	order := filepath.Join(h.dir, "order")
	for _, q := range []string{"alt", "fresh"} {
		h.ok("cls", "queue", "set", q, "--policy", "cp")
		b := "100" // the dependent's estimate at submission
		if q == "fresh" {
			b = "1"
		}
		for _, j := range [][]string{{"--est", "1", "a"}, {"-H", "-p", "a", "--est", b, "b"}, {"--est", "10", "x"},
			{"--est", "5", "c"}, {"-H", "-p", "c", "--est", "20", "d"}} {
			target := q + "-" + j[len(j)-1]
			args := append(append([]string{"-q", q}, j[:len(j)-1]...), target, "echo "+target+" >> "+order)
			for i, a := range args {
				if a == "a" || a == "c" { // a -p target of the same queue
					args[i] = q + "-" + a
				}
			}
			h.submit(args...)
		}
	}
	h.ok("mqalter", "--est", "1", "-t", "alt-b", "-Q")
	h.ok("cls", "site", "add", "m", "--type", "local", "--max", "1", "--cpus", "1", "--resource", "lic=1", "--idle", "30s")
	var ran []string
	waitFor(t, 2*time.Minute, func() error {
		b, _ := os.ReadFile(order)
		if ran = strings.Fields(string(b)); len(ran) < 6 {
			return fmt.Errorf("%d chain heads ran: %v", len(ran), ran)
		}
		return nil
	})
	var alt, fresh []string
	for _, r := range ran {
		if q, target, _ := strings.Cut(r, "-"); q == "alt" {
			alt = append(alt, target)
		} else {
			fresh = append(fresh, target)
		}
	}
	if want := []string{"c", "x", "a"}; !slices.Equal(alt, fresh) || !slices.Equal(fresh, want) {
		t.Fatalf("the altered chains' heads ran %v, the fresh ones %v; want both %v", alt, fresh, want)
	}

	r := h.submit("-H", "--gpus", "1", "--resource", "lic=2,scratch=3", "R", "true")
	sr := strconv.FormatInt(r, 10)
	res := h.run("mqalter", "--gpus", "0", "--resource", "lic=1,scratch=0", "--resource", "fpga=1", sr, "-Q")
	if want := "mqalter: warning: job " + sr + " waits: needs fpga=1"; res.code != 0 || res.stdout != "" || !strings.HasPrefix(res.stderr, want) {
		t.Fatalf("mqalter to an undeclared resource: %s; want exit 0 and a warning %q", res, want)
	}
	if out := h.ok("mqstat", "-j", sr); !strings.Contains(out, "resources: fpga=1 lic=1\n") {
		t.Fatalf("mqstat -j %d after mqalter:\n%s", r, out)
	}
	h.ok("mqrls", sr)
	waitFor(t, time.Minute, func() error {
		if out := h.ok("mqstat", "-j", sr); !strings.Contains(out, "cannot run:") || !strings.Contains(out, "fpga") {
			return fmt.Errorf("job %d does not say it waits for fpga:\n%s", r, out)
		}
		return nil
	})
	h.ok("mqalter", "--resource", "fpga=0", sr)
	if d := h.waitState(r, "DF", 2*time.Minute); d.State != "D" {
		t.Fatalf("job %d ended %s: %s", r, d.State, d.Reason)
	}

	first, err := strconv.ParseInt(strings.Fields(h.ok("mqsub", "-H", "--array", "1-4", "arr", "true"))[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	rng := fmt.Sprintf("%d-%d", first, first+3)
	if out := h.ok("mqalter", "--priority", "7", rng); strings.Count(out, "changed job") != 4 {
		t.Fatalf("mqalter of the array printed %q", out)
	}
	h.ok("mqalter", "--time", "5m", strconv.FormatInt(first+1, 10))
	for i := range int64(4) {
		out := h.ok("mqstat", "-j", strconv.FormatInt(first+i, 10))
		if !strings.Contains(out, "priority:") || !strings.Contains(out, " 7\n") || strings.Contains(out, "time limit: 300s") != (i == 1) {
			t.Fatalf("array member %d after mqalter:\n%s", first+i, out)
		}
	}

	s := h.submit("S", "sleep 300")
	h.waitState(s, "E", 2*time.Minute)
	ss := strconv.FormatInt(s, 10)
	res = h.run("mqalter", "--priority", "1", ss)
	if res.code != 1 || strings.Count(res.stderr, "\n") != 1 || !strings.Contains(res.stderr, "job "+ss+" is executing") {
		t.Fatalf("mqalter of a running job: %s", res)
	}
	for _, bad := range [][]string{{"--resource", "9lives=1"}, {"--resource", "lic=x"}, {"--resource", "lic=-1"},
		{"--resource", "gpus=0"}, {"--resource", "lic=1,lic=0"}, {"--gpus", "-1"}, {"--resource", "lic"}} {
		res := h.run("mqalter", append(bad, rng)...)
		if res.code != 2 || strings.Count(res.stderr, "\n") != 1 {
			t.Errorf("mqalter %v: %s", bad, res)
		}
	}
	h.ok("mqdel", ss)
}

// TestAlterKilledMidway: a CLS killed with SIGKILL while mqalter changes
// 100,000 jobs (10,000 a transaction) keeps every job whole: after the
// restart each has all its old values or all its new ones, those changed
// are whole batches from the first id, none is left held, and mqalter
// run again changes the rest. The kill comes once the first batch is
// committed; on a fast machine the alter may be done by then, which the
// checks also hold for.
func TestAlterKilledMidway(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	const n = 100000
	first, err := strconv.ParseInt(strings.Fields(h.ok("mqsub", "--array", fmt.Sprintf("1-%d", n), "--mem", "100M", "big", "true"))[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	rng := fmt.Sprintf("%d-%d", first, first+n-1)
	args := []string{"--mem", "2G", "--priority", "3", "--est", "1h", rng, "-Q"}
	cmd := exec.Command(filepath.Join(binDir, "mqalter"), args...)
	cmd.Env, cmd.Dir = h.env(), h.dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor(t, 2*time.Minute, func() error {
		if out := h.ok("mqstat", "-j", strconv.FormatInt(first, 10)); !strings.Contains(out, "mem=2 GiB") {
			return fmt.Errorf("the first batch is not committed yet")
		}
		return nil
	})
	h.stopCLS(syscall.SIGKILL, time.Minute)
	select {
	case err := <-done:
		t.Logf("mqalter ended %v", err)
	case <-time.After(time.Minute):
		t.Fatal("mqalter did not end when its CLS was killed")
	}
	h.startCLS("--local", "0")

	type row struct {
		ID       int64   `json:"id"`
		State    string  `json:"state"`
		Priority int     `json:"priority"`
		Mem      int64   `json:"mem_bytes"`
		Est      float64 `json:"est"`
	}
	check := func(round string) (changed int64) {
		var rows []row
		if err := json.Unmarshal([]byte(h.ok("mqstat", "--json", "-s", "WQHEDFBX")), &rows); err != nil {
			t.Fatalf("%s: mqstat --json: %v", round, err)
		}
		if len(rows) != n {
			t.Fatalf("%s: %d jobs listed, want %d", round, len(rows), n)
		}
		slices.SortFunc(rows, func(a, b row) int { return int(a.ID - b.ID) })
		for i, r := range rows {
			isNew := r.Priority == 3 && r.Mem == 2<<30 && r.Est == 3600
			isOld := r.Priority == 0 && r.Mem == 100<<20 && r.Est == 0
			switch {
			case r.State != "Q":
				t.Fatalf("%s: job %d is %s, want Q", round, r.ID, r.State)
			case !isNew && !isOld:
				t.Fatalf("%s: job %d is half changed: %+v", round, r.ID, r)
			case isNew && int64(i) != changed:
				t.Fatalf("%s: job %d changed after one that was not", round, r.ID)
			case isNew:
				changed++
			}
		}
		if changed%10000 != 0 && changed != n {
			t.Fatalf("%s: %d jobs changed, not whole batches of 10,000", round, changed)
		}
		return changed
	}
	t.Logf("the kill left %d of %d jobs changed", check("after the kill"), n)
	h.ok("mqalter", args...)
	if got := check("after mqalter again"); got != n {
		t.Fatalf("mqalter again changed %d jobs in all, want %d", got, n)
	}
}
