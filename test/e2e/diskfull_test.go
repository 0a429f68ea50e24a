//go:build e2e

package e2e

import (
	"errors"
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
		// A process killed is not gone at once, nor its files closed:
		// "target is busy" until then, longer on a busy machine.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			h.killAll()
			out, err := exec.Command("umount", h.home).CombinedOutput()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				h.t.Errorf("umount %s: %v: %s", h.home, err, out)
				exec.Command("umount", "-l", h.home).Run()
				return
			}
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

// fillTo writes a file in dir until the filesystem has at most leave
// bytes free and returns its path.
func fillTo(t *testing.T, dir string, leave int64) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "fill-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for free := freeBytes(t, dir); free > leave; free = freeBytes(t, dir) {
		if _, err := f.Write(buf[:min(int64(len(buf)), free-leave)]); err != nil {
			t.Fatalf("filling %s: %v", dir, err)
		}
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
			if !strings.Contains(r.stderr, "full") || !strings.Contains(r.stderr, "free space on the filesystem of "+h.home) {
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

// TestOutputOverCap: a local job that writes more than cls serve
// --max-output is stopped and fails with the reason, once, its output
// kept up to the cap: in its file under --output files, in its stream
// (marked cut) under the default, streams.
func TestOutputOverCap(t *testing.T) {
	for _, mode := range []string{"streams", "files"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t)
			h.tmpfsHome(20 << 20)
			h.startCLS("--local", "1", "--max-output", "1M", "--output", mode)
			id := h.submit("big", "head -c 5000000 /dev/zero; sleep 600")
			d := h.waitState(id, "FD", 90*time.Second)
			if d.State != "F" || !strings.Contains(d.Reason, "cap of 1048576 bytes") || d.Attempts != 1 {
				t.Fatalf("job %d ended %s after %d attempts, reason %q; want failed once over the cap", id, d.State, d.Attempts, d.Reason)
			}
			if mode == "files" {
				fi, err := os.Stat(d.Stdout)
				if err != nil || fi.Size() != 1<<20 {
					t.Errorf("stdout %s: %v, %v; want the cap, 1 MiB", d.Stdout, fi, err)
				}
			} else {
				if e := d.StdoutStream; e == nil || e.Bytes != 1<<20 || !e.Cut {
					t.Errorf("stdout stream %+v; want the cap, 1 MiB, cut", e)
				}
				if text := h.ok("mqstat", "-j", strconv.FormatInt(id, 10)); !strings.Contains(text, "cut at its cap") {
					t.Errorf("mqstat -j does not say the stdout was cut at its cap:\n%s", text)
				}
			}
			if r := h.run("mqstat", "--cat", strconv.FormatInt(id, 10)); r.code != 0 || len(r.stdout) != 1<<20 || strings.Trim(r.stdout, "\x00") != "" {
				t.Errorf("mqstat --cat: exit %d, %d bytes, stderr %q; want the cap, 1 MiB of zeros", r.code, len(r.stdout), r.stderr)
			}
			if r := h.run("mqwait", strconv.FormatInt(id, 10)); r.code != 1 || !strings.Contains(r.stderr, "cap of 1048576 bytes") {
				t.Errorf("mqwait of the job: %s; want exit 1 and the reason", r)
			}
		})
	}
}

// TestOutputFillsDisk: a job whose output would fill MQ_HOME's small disk
// is stopped where the reserve begins and fails with the reason, not
// rerun; mqwait returns, mqstat answers, and mqdel works even once the
// disk is full.
func TestOutputFillsDisk(t *testing.T) {
	h := newHarness(t)
	h.tmpfsHome(3 << 20)
	h.startCLS("--local", "1", "--max-output", "0")
	held := h.submit("-p", "never", "held", "true")
	id := h.submit("big", "head -c 5000000 /dev/zero; sleep 600")
	r := h.run("mqwait", strconv.FormatInt(id, 10))
	if r.code == 0 {
		t.Errorf("mqwait of a failed job exited 0: %s", r)
	}
	d := h.job(id)
	if d.State != "F" || !strings.Contains(d.Reason, "nearly full") || d.Attempts != 1 {
		t.Fatalf("job %d is %s after %d attempts, reason %q; want failed once for its output", id, d.State, d.Attempts, d.Reason)
	}
	t.Logf("reason: %s; free %d bytes", d.Reason, freeBytes(t, h.home))
	// Now fill what is left, as anything else writing there would.
	p := fill(t, h.home)
	t.Logf("free after the fill: %d bytes", freeBytes(t, h.home))
	if r := h.run("mqdel", strconv.FormatInt(held, 10)); r.code != 0 {
		t.Fatalf("mqdel on a full disk: %s", r)
	}
	h.waitState(held, "X", 30*time.Second)
	if _, err := os.Stat(filepath.Join(h.home, "reserve")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the reserve file is still there after a delete on a full disk (%v): was the delete in the space the output left?", err)
	}
	h.ok("mqstat")
	if p != "" {
		os.Remove(p)
	}
	// Not rerun: still one attempt, well after a lease.
	if d := h.job(id); d.Attempts != 1 || d.State != "F" {
		t.Errorf("job %d is %s after %d attempts; want failed once", id, d.State, d.Attempts)
	}
}

// TestDiskFilledUnderWork: something else filling MQ_HOME's disk while
// jobs run fails none of them. The running ones, stopped for the output
// reserve after a line of their own, are requeued (not counted); the
// placeholders take no work while the disk is below the reserve; once
// the space is freed the whole workflow, dependents too, finishes.
func TestDiskFilledUnderWork(t *testing.T) {
	h := newHarness(t)
	h.tmpfsHome(8 << 20)
	h.startCLS("--local", "2")
	var first, rest []int64
	for range 2 {
		first = append(first, h.submit("a", `echo a; touch started-$MQ_JOB_ID; while [ ! -e go ]; do sleep 0.05; done; echo b`))
	}
	for range 10 {
		rest = append(rest, h.submit("-p", "a", "b", "echo dependent"))
	}
	for range 4 {
		rest = append(rest, h.submit("c", "echo other"))
	}
	waitFor(t, 90*time.Second, func() error {
		for _, id := range first {
			if _, err := os.Stat(filepath.Join(h.dir, "started-"+strconv.FormatInt(id, 10))); err != nil {
				return err
			}
		}
		return nil
	})
	// Below the output reserve (a tenth of the disk, 800 KiB), with room
	// left for the database to commit what follows.
	p := fillTo(t, h.home, 400<<10)
	t.Logf("free after the fill: %d bytes", freeBytes(t, h.home))
	if err := os.WriteFile(filepath.Join(h.dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Each running job is stopped as it writes its second line, for the
	// disk others filled, and queued again.
	waitFor(t, 90*time.Second, func() error {
		for _, id := range first {
			d := h.job(id)
			if d.State == "F" {
				t.Fatalf("job %d failed on a disk others filled: %q", id, d.Reason)
			}
			if !slices.ContainsFunc(d.History, func(a struct {
				Attempt  int    `json:"attempt"`
				Site     string `json:"site"`
				Host     string `json:"host"`
				Started  string `json:"started"`
				Finished string `json:"finished"`
				Exit     *int   `json:"exit"`
				Reason   string `json:"reason"`
			}) bool {
				return strings.Contains(a.Reason, "nearly full")
			}) {
				return fmt.Errorf("job %d is %s, history %+v: not stopped for the disk yet", id, d.State, d.History)
			}
		}
		return nil
	})
	for q, c := range h.summary() {
		if c["F"] > 0 || c["D"] > 0 {
			t.Errorf("queue %s while the disk is full: %v; want nothing failed, nothing run", q, c)
		}
	}
	// The pause is shown: the placeholders' heartbeats say so.
	waitFor(t, 90*time.Second, func() error {
		if out := h.ok("cls", "site", "list"); !strings.Contains(out, "(2 paused: output disk nearly full or refusing writes)") {
			return fmt.Errorf("cls site list:\n%s", out)
		}
		return nil
	})
	if p != "" {
		os.Remove(p)
	}
	t.Logf("free after the fill is removed: %d bytes", freeBytes(t, h.home))
	for _, id := range append(first, rest...) {
		if d := h.waitState(id, "DF", 120*time.Second); d.State != "D" {
			t.Errorf("job %d ended %s: %q", id, d.State, d.Reason)
		}
	}
	// The local placeholders log into the CLS's log (the disk kept room
	// for the lines): each that paused says so, and that it resumed.
	b, err := os.ReadFile(filepath.Join(h.home, "cls.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	paused, resumed, stopped := strings.Count(log, "taking no new jobs"), strings.Count(log, "room on the output disk again"), strings.Count(log, "it stopped jobs, which run again")
	if paused == 0 || resumed == 0 || stopped == 0 {
		t.Errorf("cls.log says %d placeholders paused, %d resumed, %d stopped jobs for the disk; want each", paused, resumed, stopped)
	}
}
