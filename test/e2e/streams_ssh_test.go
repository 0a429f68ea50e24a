//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestStreamsSSHAgents: 200 echo jobs on two remote placeholders (cls
// agent --cls over SSH) under the default output, streams: each agent
// writes stream files in its own output directory and ships them to the
// CLS in bulk, which leaves at most 4 files per placeholder in the CLS's
// output area, each the very bytes of the agent's file, and mqstat --cat
// of every job prints its line from there.
func TestStreamsSSHAgents(t *testing.T) {
	t.Parallel()
	requireSSH(t)
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	agents := []*agentProc{
		s.startAgent(agentOpts{key: h.newKey("placeholder", "ph1"), args: []string{"--slots", "2"}}),
		s.startAgent(agentOpts{key: h.newKey("placeholder", "ph2"), args: []string{"--slots", "2"}}),
	}
	r := h.run("mqsub", "-b", "--array", "1-200", "t", `echo job-$MQ_JOB_ID; [ $MQ_ARRAY_INDEX = 7 ] && echo err-$MQ_JOB_ID >&2; true`)
	ids := strings.Fields(r.stdout)
	if r.code != 0 || len(ids) != 200 {
		t.Fatalf("mqsub --array 1-200: %s", r)
	}
	byPH := streamFiles(t, h.home)
	if len(byPH) == 0 || len(byPH) > 2 {
		t.Errorf("stream files of %d placeholders, want 1 or 2: %v", len(byPH), byPH)
	}
	for ph, files := range byPH {
		if len(files) > 4 {
			t.Errorf("placeholder %d left %d files: %v", ph, len(files), files)
		}
		for _, f := range files {
			cp, err := os.ReadFile(filepath.Join(h.home, "output", protocol.StreamDir, f))
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, a := range agents {
				site, err := os.ReadFile(filepath.Join(a.out, protocol.StreamDir, f))
				if err == nil {
					found = true
					if !bytes.Equal(site, cp) {
						t.Errorf("%s: the CLS's copy (%d bytes) is not the agent's file (%d bytes)", f, len(cp), len(site))
					}
				}
			}
			if !found {
				t.Errorf("%s is in the CLS's output area but in no agent's", f)
			}
		}
	}
	for _, a := range agents {
		// The agent's own output directory holds its streams, no file per job.
		filepath.WalkDir(a.out, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if _, ok := protocol.StreamFileOwner(d.Name()); !ok {
					t.Errorf("agent output directory holds %s, not a stream file", path)
				}
			}
			return nil
		})
	}
	for _, id := range ids {
		if got := h.ok("mqstat", "--cat", id); got != "job-"+id+"\n" {
			t.Errorf("mqstat --cat %s printed %q", id, got)
		}
	}
	if got := h.ok("mqstat", "--cat", ids[6], "--stderr"); got != "err-"+ids[6]+"\n" {
		t.Errorf("mqstat --cat %s --stderr printed %q", ids[6], got)
	}
	if got := h.ok("mqstat", "--cat", ids[9], "--follow"); got != "job-"+ids[9]+"\n" {
		t.Errorf("mqstat --cat %s --follow printed %q", ids[9], got)
	}
}

// TestSSHFollowStreams: a job a remote agent (cls agent --cls over SSH)
// runs under the default output, streams, is followed live by mqstat
// --cat --follow on the CLS host: while it is followed the agent ships
// its stream file's growth, so each line arrives while the job waits for
// its next gate (no report of the placeholder's would ship it: the job is
// alone), and both followers exit 0 when it ends.
func TestSSHFollowStreams(t *testing.T) {
	t.Parallel()
	requireSSH(t)
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	a := s.startAgent(agentOpts{key: h.newKey("placeholder", "ph")})
	a.waitConnected(t, 1, 30*time.Second)

	id := h.submit("t", gated([]string{"first", "second", "third"}, 0))
	out := h.startFollow(filepath.Join(binDir, "mqstat"), "--cat", idStr(id), "--follow")
	errs := h.startFollow(filepath.Join(binDir, "mqstat"), "--cat", idStr(id), "--follow", "--stderr")
	out.line(t, "first")
	errs.line(t, "err-first")
	if d := h.sshJob(id); d.State != "E" || d.Site != "remote" {
		t.Fatalf("job %d is %s at site %q while its gate is shut", id, d.State, d.Site)
	}
	// How long a line takes to be seen once written (the job prints it
	// as soon as it sees the gate, polled every 20 ms): logged, not
	// asserted, on a busy machine.
	opened := time.Now()
	h.openGate(1)
	out.line(t, "second")
	t.Logf("a line written while followed seen after %v", time.Since(opened).Round(time.Millisecond))
	errs.line(t, "err-second")
	if d := h.sshJob(id); d.State != "E" {
		t.Fatalf("job %d is %s while its second gate is shut", id, d.State)
	}
	h.openGate(2)
	out.line(t, "third")
	errs.line(t, "err-third")
	for _, f := range []*followProc{out, errs} {
		if code := f.exit(t); code != 0 {
			t.Errorf("%s exited %d; stderr: %s", f.cmd.Args[0], code, f.stderr.String())
		}
	}
	if got := h.ok("mqstat", "--cat", idStr(id)); got != "first\nsecond\nthird\n" {
		t.Errorf("mqstat --cat printed %q", got)
	}
	if js := h.ok("mqstat", "-j", idStr(id), "--json"); !strings.Contains(js, `"stdout_stream"`) {
		t.Errorf("job %d's stdout is not in a stream: %s", id, js)
	}
}
