package site

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mq-hpc/mq/internal/site/batch"
)

// TestOrphansListed: the agents a killed CLS left running for a local
// site are listed as its running placeholders, found by their command
// line (this site, this home's output) among this user's processes;
// another site's, another home's, another user's (whatever its command
// line says) and other processes are not. /proc is scanned once: later
// calls keep the agents found that still run, and never find new ones.
func TestOrphansListed(t *testing.T) {
	const me, other = 1000, 1001
	cmdline := func(args ...string) *fstest.MapFile {
		var b []byte
		for _, a := range args {
			b = append(append(b, a...), 0)
		}
		return &fstest.MapFile{Data: b}
	}
	dir := func(uid uint32) *fstest.MapFile {
		return &fstest.MapFile{Mode: fs.ModeDir | 0o555, Sys: &syscall.Stat_t{Uid: uid}}
	}
	agent := cmdline("/usr/bin/cls", "agent", "--site", "g", "--out", "/home/u/.mq/output")
	proc := fstest.MapFS{
		"101/cmdline":  cmdline("/usr/bin/cls", "agent", "--site", "g", "--host", "h", "--out", "/home/u/.mq/output", "--orphan-exit"),
		"102/cmdline":  cmdline("/usr/bin/cls", "agent", "--site", "local", "--out", "/home/u/.mq/output"),
		"103/cmdline":  cmdline("/usr/bin/cls", "agent", "--site", "g", "--out", "/tmp/other/output"),
		"104/cmdline":  cmdline("/usr/bin/cls", "serve", "--site", "g", "--out", "/home/u/.mq/output"),
		"105/cmdline":  {Data: nil}, // a zombie
		"106/cmdline":  cmdline("/usr/bin/cls", "agent", "--out", "/home/u/.mq/output", "--site", "g"),
		"107/cmdline":  agent, // another user's, spoofing one
		"self/cmdline": agent,
	}
	for _, pid := range []string{"101", "102", "103", "104", "105", "106", "self"} {
		proc[pid] = dir(me)
	}
	proc["107"] = dir(other)
	orphans := AgentOrphans(proc, me, "g", "/home/u/.mq/output")
	pids := orphans()
	if !slices.Equal(pids, []int{101, 106}) {
		t.Errorf("orphans = %v, want [101 106]", pids)
	}

	p := &Processes{Orphans: func() []int { return pids }}
	ps, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []batch.Placeholder{{ID: "101", State: batch.Running}, {ID: "106", State: batch.Running}}
	if !slices.Equal(ps, want) {
		t.Errorf("List = %+v, want the orphans running: %+v", ps, want)
	}

	// 101 exits, its pid taken by another process; an agent that starts
	// now is this CLS's own, not an orphan.
	proc["101/cmdline"] = cmdline("/bin/sh", "-c", "true")
	proc["108"], proc["108/cmdline"] = dir(me), agent
	if pids := orphans(); !slices.Equal(pids, []int{106}) {
		t.Errorf("orphans later = %v, want [106]", pids)
	}
}

// TestOrphanCancelled: cancelling a site's placeholders (cls site remove)
// stops its orphans too, and only pids still listed as orphans.
func TestOrphanCancelled(t *testing.T) {
	start := func() *exec.Cmd {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd
	}
	orphan, other := start(), start()
	p := &Processes{Orphans: func() []int { return []int{orphan.Process.Pid} }}
	ids := []string{strconv.Itoa(orphan.Process.Pid), strconv.Itoa(other.Process.Pid)}
	if err := p.Cancel(context.Background(), ids); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- orphan.Wait() }()
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "terminated") {
			t.Errorf("the orphan ended with %v; want terminated", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the orphan still runs a minute after Cancel")
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("a process that is no orphan of the site was signalled: %v", err)
	}
}

// TestLeave: a local site left (cls stop --keep-running) does not signal
// its placeholders, and their exits are no longer told: the CLS that
// would requeue their jobs is stopping. Each runs in a session of its
// own, so the CLS's exit never orphans its process group: the kernel
// would send it SIGHUP if it were stopped then.
func TestLeave(t *testing.T) {
	exited := make(chan int, 1)
	p := &Processes{
		Command: func() *exec.Cmd { return exec.Command("sleep", "600") },
		Exited:  func(pid int) { exited <- pid },
	}
	ids, err := p.Submit(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(ids[0])
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if sid, err := unix.Getsid(pid); err != nil || sid != pid {
		t.Errorf("the placeholder %d runs in session %d (%v), want one of its own", pid, sid, err)
	}
	p.Leave()
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the placeholder %d does not run after Leave: %v", pid, err)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	p.wg.Wait() // its exit seen
	select {
	case pid := <-exited:
		t.Errorf("the exit of %d was told after Leave", pid)
	default:
	}
}

// TestCloseSaysCLSStops: Close stops the placeholders with
// protocol.CLSStopSignal, not SIGTERM, so they report the jobs they stop
// as stopped by the CLS (not counted against their attempts).
func TestCloseSaysCLSStops(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "signal")
	ready := filepath.Join(dir, "ready")
	script := fmt.Sprintf(`trap 'echo USR2 > %[1]s; exit 0' USR2; trap 'echo TERM > %[1]s; exit 0' TERM; touch %[2]s; while :; do sleep 0.05; done`, got, ready)
	p := &Processes{Command: func() *exec.Cmd { return exec.Command("sh", "-c", script) }}
	if _, err := p.Submit(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the placeholder did not start in a minute")
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil || strings.TrimSpace(string(b)) != "USR2" {
		t.Errorf("the placeholder got %q (%v); want USR2 (protocol.CLSStopSignal)", b, err)
	}
}
