package site

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/mq-hpc/mq/internal/site/batch"
)

// TestOrphansListed: the agents a killed CLS left running for a local
// site are listed as its running placeholders, found by their command
// line (this site, this home's output); another site's, another home's
// and other processes are not.
func TestOrphansListed(t *testing.T) {
	cmdline := func(args ...string) *fstest.MapFile {
		var b []byte
		for _, a := range args {
			b = append(append(b, a...), 0)
		}
		return &fstest.MapFile{Data: b}
	}
	proc := fstest.MapFS{
		"101/cmdline":  cmdline("/usr/bin/cls", "agent", "--site", "g", "--host", "h", "--out", "/home/u/.mq/output", "--orphan-exit"),
		"102/cmdline":  cmdline("/usr/bin/cls", "agent", "--site", "local", "--out", "/home/u/.mq/output"),
		"103/cmdline":  cmdline("/usr/bin/cls", "agent", "--site", "g", "--out", "/tmp/other/output"),
		"104/cmdline":  cmdline("/usr/bin/cls", "serve", "--site", "g", "--out", "/home/u/.mq/output"),
		"105/cmdline":  {Data: nil}, // a zombie
		"106/cmdline":  cmdline("/usr/bin/cls", "agent", "--out", "/home/u/.mq/output", "--site", "g"),
		"self/cmdline": cmdline("/usr/bin/cls", "agent", "--site", "g", "--out", "/home/u/.mq/output"),
	}
	pids := AgentPids(proc, "g", "/home/u/.mq/output")
	if !slices.Equal(pids, []int{101, 106}) {
		t.Errorf("AgentPids = %v, want [101 106]", pids)
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
