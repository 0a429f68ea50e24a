//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// setNofile sets a process's descriptor limit (soft and hard), as
// prlimit(1) does: the CLS is started normally and limited from outside,
// so the test process keeps its own (higher) limit for the flood.
func setNofile(t *testing.T, pid int, n uint64) {
	t.Helper()
	rl := syscall.Rlimit{Cur: n, Max: n}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(syscall.RLIMIT_NOFILE),
		uintptr(unsafe.Pointer(&rl)), 0, 0, 0); e != 0 {
		t.Skipf("cannot limit the CLS's descriptors: %v", e)
	}
}

// A flood of connections that send nothing, on the SSH port and on the
// socket, each past the CLS's descriptor limit, neither ends the CLS nor
// keeps a user out: mqstat and mqsub are served and jobs run. (Before the
// bounds, accept4's EMFILE ended `cls serve`.)
func TestConnectionFloodKeepsServing(t *testing.T) {
	const limit, flood = 1024, 1100
	var own syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &own); err != nil || own.Cur < 2*flood+200 {
		t.Skipf("this test needs %d descriptors of its own; the limit is %d", 2*flood+200, own.Cur)
	}
	h := newHarness(t)
	s := h.startSSHCLS("--local", "1")
	setNofile(t, h.cls.pid(), limit)
	key := h.newKey("user", "alice")

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var refusedTCP, refusedUnix int
	for range flood {
		c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
		if err != nil {
			refusedTCP++
			continue
		}
		conns = append(conns, c)
	}
	for range flood {
		c, err := net.Dial("unix", h.sock())
		if err != nil {
			refusedUnix++ // the backlog is full: EAGAIN
			continue
		}
		conns = append(conns, c)
	}
	t.Logf("holding %d silent connections (%d tcp and %d unix dials failed)", len(conns), refusedTCP, refusedUnix)
	if len(conns) <= limit {
		t.Fatalf("only %d connections opened; the flood must pass the CLS's limit of %d", len(conns), limit)
	}

	// The socket is served while the flood holds on.
	start := time.Now()
	waitFor(t, 90*time.Second, func() error {
		if h.cls.exited() {
			t.Fatalf("the CLS exited under the flood: %s", h.cls.stderr.String())
		}
		r := h.run("mqstat")
		if r.code != 0 {
			return fmt.Errorf("mqstat: %s", r)
		}
		return nil
	})
	t.Logf("mqstat over the socket served %v into the flood", time.Since(start).Round(time.Millisecond))
	id := h.submit("flood", "true")
	h.waitState(id, "D", 90*time.Second)

	// So is the SSH endpoint, from the very address that floods it.
	if _, err := os.Stat("/usr/bin/ssh"); err == nil {
		waitFor(t, 90*time.Second, func() error {
			if r := s.ssh(key, "mqstat"); r.code != 0 {
				return fmt.Errorf("ssh mqstat: %s", r)
			}
			return nil
		})
	}
	if h.cls.exited() {
		t.Fatalf("the CLS exited: %s", h.cls.stderr.String())
	}
	log, _ := os.ReadFile(filepath.Join(h.home, "cls.log"))
	if strings.Contains(string(log), "level=ERROR") {
		t.Errorf("errors logged under the flood:\n%s", clip(string(log)))
	}
}
