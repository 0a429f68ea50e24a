package jobexec

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// AwaitExit returns once the process has exited and leaves it for Wait,
// which still gets its exit status.
func TestAwaitExit(t *testing.T) {
	pidfd := -1
	cmd := exec.Command("/bin/sh", "-c", "read x; exit 3")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{PidFD: &pidfd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if pidfd < 0 {
		t.Skip("no pidfd on this kernel")
	}
	exited := make(chan struct{})
	go func() {
		if !AwaitExit(pidfd) {
			t.Error("AwaitExit returned false for a process that exited")
		}
		close(exited)
	}()
	select {
	case <-exited:
		t.Fatal("AwaitExit returned while the process runs")
	case <-time.After(50 * time.Millisecond): // a return this early would be wrong whatever the load
	}
	in.Close() // the shell's read ends; it exits
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("AwaitExit did not return after the process exited")
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("Wait = %v, want exit status 3", err)
	}
	if AwaitExit(-1) { // no pidfd: returns at once
		t.Error("AwaitExit(-1) = true")
	}
}
