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

// TestWaitAcrossRestart: mqwait, mqsub -b of one job and mqsub -b of an
// array keep waiting while the CLS is killed and started again: each says
// the CLS went away, and exits as its jobs ended (mqwait 1 naming the
// failed job, mqsub -b with the job's exit status, 0 for the array done).
func TestWaitAcrossRestart(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "3", "--lease", "3s")
	const gate = `while [ ! -e gate ]; do sleep 0.05; done`
	id := h.submit("one", gate+"; exit 3")
	wait := h.start(false, "mqwait", strconv.FormatInt(id, 10))
	one := h.start(false, "mqsub", "-b", "two", gate+"; exit 4")
	arr := h.start(false, "mqsub", "-b", "--array", "1-3", "three", gate)
	// All three are waiting once their jobs are listed and mqwait has
	// shown its first counts.
	waitFor(t, 60*time.Second, func() error {
		if n := len(h.jobs()); n != 5 {
			return fmt.Errorf("%d jobs listed, want 5", n)
		}
		if !strings.Contains(wait.out.String(), "0/1 ended") {
			return fmt.Errorf("mqwait has not shown its counts: %q", wait.out.String())
		}
		return nil
	})
	h.stopCLS(syscall.SIGKILL, time.Minute)
	h.startCLS("--local", "3", "--lease", "3s")
	if err := os.WriteFile(filepath.Join(h.dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		b    *background
		code int
		says string
	}{
		{"mqwait", wait, 1, fmt.Sprintf("job %d failed (exit 3)", id)},
		{"mqsub -b", one, 4, "failed"},
		{"mqsub -b --array", arr, 0, ""},
	} {
		code := c.b.wait(t)
		out := c.b.out.String()
		if code != c.code || !strings.Contains(out, c.says) {
			t.Errorf("%s exited %d, want %d saying %q:\n%s", c.name, code, c.code, c.says, out)
		}
		if !strings.Contains(out, "the CLS went away") {
			t.Errorf("%s did not say the CLS went away:\n%s", c.name, out)
		}
	}
}
