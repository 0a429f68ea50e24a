//go:build e2e

package e2e

import (
	"errors"
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

// tmpfsHome mounts a tmpfs of size bytes on the harness's MQ_HOME (before
// the CLS starts), unmounted after the harness's processes are gone. It
// skips the test when that cannot be done (not root, no mount).
func (h *harness) tmpfsHome(size int64) {
	h.t.Helper()
	if os.Geteuid() != 0 {
		h.t.Skip("needs root to mount a tmpfs for MQ_HOME")
	}
	if _, err := exec.LookPath("mount"); err != nil {
		h.t.Skip("no mount command")
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10)+",mode=0700", "tmpfs", h.home).CombinedOutput()
	if err != nil {
		h.t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	h.t.Cleanup(func() {
		h.killAll()
		if out, err := exec.Command("umount", h.home).CombinedOutput(); err != nil {
			h.t.Errorf("umount %s: %v: %s", h.home, err, out)
			exec.Command("umount", "-l", h.home).Run()
		}
	})
}

// fill writes a file in dir until the filesystem is full and returns its
// path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "fill-")
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return ""
		}
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
	}
	// The last bytes a block at a time, so nothing is left.
	for _, err := f.Write(buf[:512]); err == nil; _, err = f.Write(buf[:512]) {
	}
	return f.Name()
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// TestDiskFullThenDispatch: a submit that fails because MQ_HOME's disk is
// full must not stop dispatch. Once space is back, the next job runs on
// the placeholder that was waiting all along.
func TestDiskFullThenDispatch(t *testing.T) {
	h := newHarness(t)
	h.tmpfsHome(20 << 20)
	h.startCLS("--local", "1")
	first := h.submit("-b", "r1", "true")
	d1 := h.waitState(first, "D", 60*time.Second)
	agents := h.agents()
	if len(agents) != 1 {
		t.Fatalf("want 1 local placeholder, have %v", agents)
	}
	var fills []string
	failed := false
	for i := 0; i < 4 && !failed; i++ {
		if p := fill(t, h.home); p != "" {
			fills = append(fills, p)
		}
		r := h.run("mqsub", "r2", "true")
		if r.code != 0 {
			failed = true
			t.Logf("mqsub on a full disk: %s", strings.TrimSpace(r.stderr))
			oneLineErr(t, "mqsub", r)
			if !strings.Contains(r.stderr, "full") {
				t.Errorf("mqsub on a full disk: want the reason (full), got %q", r.stderr)
			}
		}
	}
	if !failed {
		t.Fatal("mqsub kept succeeding on a full disk")
	}
	for _, p := range fills {
		os.Remove(p)
	}
	t.Logf("free after the fill is removed: %d bytes", freeBytes(t, h.home))
	r3 := h.submit("r3", "true")
	d3 := h.waitState(r3, "D", 90*time.Second)
	if d3.Placeholder != d1.Placeholder {
		t.Errorf("r3 ran on placeholder %d, want the waiting one, %d", d3.Placeholder, d1.Placeholder)
	}
	if now := h.agents(); !slices.Equal(now, agents) {
		t.Errorf("local placeholders were %v, now %v: the waiting one should have taken r3", agents, now)
	}
	if _, err := os.Stat(filepath.Join(h.home, "mq.db")); err != nil {
		t.Fatal(err)
	}
}
