package jobexec

import (
	"os/exec"
	"testing"
)

// TestUsageOf: the figures are the process's own, its children's included.
func TestUsageOf(t *testing.T) {
	t.Parallel()
	if u := UsageOf(nil); u.Measured() {
		t.Fatalf("UsageOf(nil) = %+v", u)
	}
	// The CPU is spent in a child the shell waits for.
	cmd := exec.Command("/bin/sh", "-c", `sh -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done'; true`)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	u := UsageOf(cmd.ProcessState)
	if !u.Measured() || u.MaxRSS < 100<<10 || u.MaxRSS > 1<<30 {
		t.Fatalf("max RSS %d bytes, want a shell's", u.MaxRSS)
	}
	if u.CPUUser+u.CPUSys < 0.01 {
		t.Fatalf("CPU %+v: the child's loop is not counted", u)
	}
}
