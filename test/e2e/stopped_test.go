//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAgentStoppedPastLease: a placeholder SIGSTOPped past its lease
// has its job requeued and run again elsewhere. What the first attempt
// wrote to its pipes while its placeholder was stopped must not be
// appended to the -o and -e files the second attempt wrote, once the
// placeholder is continued: those files hold the done attempt's output,
// once.
func TestAgentStoppedPastLease(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2", "--lease", "3s")
	pidFile := filepath.Join(h.dir, "a1.pid")
	goFile := filepath.Join(h.dir, "go")
	id := h.submit("-o", "o.%j", "-e", "e.%j", "t",
		fmt.Sprintf(`if [ "$MQ_ATTEMPT" = 1 ]; then echo $$ > %s; while [ ! -e %s ]; do sleep 0.05; done; fi; echo "out $MQ_ATTEMPT"; echo "err $MQ_ATTEMPT" >&2`, pidFile, goFile))
	job, agent := jobAgent(t, pidFile)
	if err := syscall.Kill(agent, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(agent, syscall.SIGCONT)
	// The first attempt writes its lines into the stopped placeholder's
	// pipes and exits.
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := h.waitState(id, "D", 2*time.Minute)
	if d.Attempts < 2 {
		t.Fatalf("job %d done in attempt %d, want a later one than the stopped placeholder's", id, d.Attempts)
	}
	check := func(when string) { userFilesHold(t, h, id, d.Attempts, when) }
	check("done")
	if err := syscall.Kill(agent, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Once continued, the placeholder reaps the first attempt and closes
	// its files: whatever it was going to write to them is written.
	waitFor(t, time.Minute, func() error {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", job)); err == nil {
			return fmt.Errorf("the first attempt's process %d is not reaped", job)
		}
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", agent))
		for _, e := range ents {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", agent, e.Name()))
			if strings.HasPrefix(filepath.Base(l), "o.") || strings.HasPrefix(filepath.Base(l), "e.") {
				return fmt.Errorf("placeholder %d still has %s open", agent, l)
			}
		}
		return nil
	})
	check("after the stopped placeholder went on")
}

// TestAgentStoppedWithJobInFlight: a placeholder stopped while the CLS
// hands it a job (its poll was parked: the reply waits in its socket)
// stays stopped past the lease; the job is requeued and done by another
// placeholder. Continued, the first reads the stale job and must not
// start it over the -o and -e files the done attempt wrote: opened, they
// would be truncated.
func TestAgentStoppedWithJobInFlight(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "0", "--lease", "3s")
	// One slot: it asks for more only once the job it holds has ended.
	a := exec.Command(filepath.Join(binDir, "cls"), "agent", "--site", "a", "--host", "hostA", "--slots", "1", "--reconnect", "5s")
	a.Env, a.Dir = h.env(), h.dir
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	go a.Wait()
	h.ok("mqsub", "-b", "warm", "true") // a is connected, and asks again
	cmd := `[ "$MQ_ATTEMPT" = 1 ] && sleep 1; echo "out $MQ_ATTEMPT"; echo "err $MQ_ATTEMPT" >&2`
	var id int64
	for try := 0; ; try++ {
		if err := syscall.Kill(a.Process.Pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		id = h.submit("-o", "o.%j", "-e", "e.%j", fmt.Sprintf("t%d", try), cmd)
		// A parked poll is answered at once; one that was not parked
		// never is (the placeholder is stopped), and the loop tries again.
		handed := false
		for end := time.Now().Add(15 * time.Second); time.Now().Before(end) && !handed; time.Sleep(50 * time.Millisecond) {
			handed = h.job(id).Attempts > 0
		}
		if handed {
			break
		}
		// Its poll was not parked when it was stopped: the job is still
		// queued. Let it run and try again.
		if try == 4 {
			t.Fatal("the stopped placeholder's poll never got a job in 5 tries")
		}
		syscall.Kill(a.Process.Pid, syscall.SIGCONT)
		h.waitState(id, "D", time.Minute)
	}
	defer syscall.Kill(a.Process.Pid, syscall.SIGCONT)
	// The lease runs out; another placeholder runs the job to its end.
	waitFor(t, time.Minute, func() error {
		if d := h.job(id); d.State != "Q" {
			return fmt.Errorf("job %d is %s, attempt %d", id, d.State, d.Attempts)
		}
		return nil
	})
	b := h.startAgent("b", "hostB")
	d := h.waitState(id, "D", time.Minute)
	b.cmd.Process.Kill()
	check := func(when string) { userFilesHold(t, h, id, d.Attempts, when) }
	check("done")
	if err := syscall.Kill(a.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Continued, a reads the job and hears from the CLS that the attempt
	// is no longer its own. Then, its slot free, it runs the next job.
	h.ok("mqsub", "-b", "after", "true")
	check("after the stopped placeholder went on")
}

// userFilesHold checks that job id's -o and -e files, o.ID and e.ID, hold
// what its attempt wrote: "out ATTEMPT", "err ATTEMPT".
func userFilesHold(t *testing.T, h *harness, id int64, attempt int, when string) {
	t.Helper()
	want := map[string]string{"o.": fmt.Sprintf("out %d\n", attempt), "e.": fmt.Sprintf("err %d\n", attempt)}
	for pre, w := range want {
		p := filepath.Join(h.dir, pre+strconv.FormatInt(id, 10))
		if got := readFile(t, p); got != w {
			t.Errorf("%s: %s holds %q, want %q", when, p, got, w)
		}
	}
}

// TestStoppedAgentCLSKilled: a local placeholder SIGSTOPped while its
// CLS is killed outlives its CLS as a running one does: continued, it
// finishes its job and reports it to the next cls serve, which has it
// done in its first attempt. The CLS's death leaves the placeholder's
// process group without a parent in its session; with a stopped member
// such a group is sent SIGHUP by the kernel, which must not end it. The
// placeholder's jobs keep SIGHUP's default action all the same: one sent
// SIGHUP dies of it (exit 129).
func TestStoppedAgentCLSKilled(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1", "--slots", "2")
	hup := h.submit("hup", `echo $$ > hup.pid; exec sleep 600`)
	gate := filepath.Join(h.dir, "gate")
	id := h.submit("k", `echo $$ > pid.$MQ_JOB_ID; echo start $MQ_JOB_ID; while [ ! -e gate ]; do sleep 0.1; done; echo end $MQ_JOB_ID; echo err $MQ_JOB_ID >&2`)
	h.waitState(id, "E", time.Minute)
	pidFile := filepath.Join(h.dir, fmt.Sprintf("pid.%d", id))
	jobPid, agent := jobAgent(t, pidFile)

	hupFile := filepath.Join(h.dir, "hup.pid")
	waitFile(t, hupFile, time.Minute)
	if err := syscall.Kill(readPid(t, hupFile), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if d := h.waitState(hup, "DF", time.Minute); d.State != "F" || d.Exit == nil || *d.Exit != 129 {
		t.Errorf("job %d sent SIGHUP ended %s, exit %v (%s); want F, exit 129", hup, d.State, d.Exit, d.Reason)
	}

	if err := syscall.Kill(agent, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(agent, syscall.SIGCONT)
	waitFor(t, time.Minute, func() error {
		if st, ok := readStat(agent); !ok || st.state != 'T' {
			return fmt.Errorf("placeholder %d is not stopped (%+v)", agent, st)
		}
		return nil
	})
	h.stopCLS(syscall.SIGKILL, 30*time.Second)
	if err := syscall.Kill(agent, syscall.SIGCONT); err != nil {
		t.Fatalf("placeholder %d is gone after its CLS was killed: %v", agent, err)
	}
	h.startCLS("--local", "1", "--slots", "2")
	if !alive(agent) || !alive(jobPid) {
		t.Errorf("placeholder %d alive %v, its job %d alive %v, after its CLS was killed while it was stopped; want both running",
			agent, alive(agent), jobPid, alive(jobPid))
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	doneInOne(t, h, id)
	// Its job done, the placeholder exits, as one whose CLS died does.
	waitFor(t, time.Minute, func() error {
		if alive(agent) {
			return fmt.Errorf("placeholder %d still runs (%s)", agent, cmdline(agent))
		}
		return nil
	})
}

// jobAgent waits for the pid a job's shell writes to pidFile, and returns
// it with its parent's, the placeholder running it.
func jobAgent(t *testing.T, pidFile string) (job, agent int) {
	t.Helper()
	waitFile(t, pidFile, time.Minute)
	job = readPid(t, pidFile)
	st, ok := readStat(job)
	if !ok {
		t.Fatalf("job process %d is gone", job)
	}
	if !strings.Contains(cmdline(st.ppid), " agent ") {
		t.Fatalf("the job's parent %d is not a placeholder: %q", st.ppid, cmdline(st.ppid))
	}
	return job, st.ppid
}
