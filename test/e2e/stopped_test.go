//go:build e2e

package e2e

import (
	"fmt"
	"os"
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
	waitFile(t, pidFile, time.Minute)
	job := readPid(t, pidFile)
	st, ok := readStat(job)
	if !ok {
		t.Fatalf("job process %d is gone", job)
	}
	agent := st.ppid
	if !strings.Contains(cmdline(agent), " agent ") {
		t.Fatalf("the job's parent %d is not a placeholder: %q", agent, cmdline(agent))
	}
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
	want := map[string]string{"o.": fmt.Sprintf("out %d\n", d.Attempts), "e.": fmt.Sprintf("err %d\n", d.Attempts)}
	check := func(when string) {
		for pre, w := range want {
			p := filepath.Join(h.dir, pre+strconv.FormatInt(id, 10))
			if got := readFile(t, p); got != w {
				t.Errorf("%s: %s holds %q, want %q", when, p, got, w)
			}
		}
	}
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
