//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClsStop: cls stop stops the CLS serving MQ_HOME and returns only
// once it has let go of the home, so a new cls serve starts at once, and
// the job its local placeholder ran runs again there. Without a CLS, or
// with one that does not stop in --timeout, it says so in one line and
// exits 1.
func TestClsStop(t *testing.T) {
	h := newHarness(t)
	r := h.run("cls", "stop")
	if r.code != 1 || !strings.Contains(r.stderr, "no CLS is serving "+h.home) {
		t.Errorf("cls stop with no CLS: %s; want exit 1, no CLS is serving", r)
	}
	oneLineErr(t, "cls", r)

	c := h.startCLS("--local", "1")
	id := h.submit("long", "sleep 600")
	h.waitState(id, "E", time.Minute)
	r = h.run("cls", "stop")
	if want := fmt.Sprintf("cls: stopped the CLS (pid %d) serving %s\n", c.pid(), h.home); r.code != 0 || r.stdout != want {
		t.Fatalf("cls stop: %s; want exit 0 and %q", r, want)
	}
	// It has let go of the home: the lock a CLS holds to its last step is
	// free, and its exit follows at once.
	f, err := os.Open(filepath.Join(h.home, "cls.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("cls stop returned while the CLS still held MQ_HOME's lock: %v", err)
	}
	f.Close()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the CLS had not exited 30 s after cls stop returned")
	}
	h.startCLS("--local", "1")
	if d := h.waitState(id, "E", time.Minute); d.Attempts < 2 {
		t.Errorf("job %d after the restart: %d attempts, want it running again", id, d.Attempts)
	}

	// A CLS that cannot stop (stopped itself, SIGSTOP): cls stop gives up
	// at its --timeout and says so; the CLS stops once it runs again.
	c = h.cls
	if err := syscall.Kill(c.pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	r = h.run("cls", "stop", "--timeout", "2s")
	syscall.Kill(c.pid(), syscall.SIGCONT)
	if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("the CLS (pid %d) has not stopped after 2s", c.pid())) {
		t.Errorf("cls stop of a stopped CLS: %s; want exit 1 and why", r)
	}
	oneLineErr(t, "cls", r)
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		t.Fatal("the CLS did not stop after SIGCONT: the SIGTERM was lost")
	}
}
