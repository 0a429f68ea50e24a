//go:build e2e

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestOutputCommand: mqstat --output prints a job's stdout (--stderr its
// stderr) from the latest attempt; a job that has not run has none.
func TestOutputCommand(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	id := h.submit("t", "echo out-$MQ_JOB_ID; echo err-$MQ_ATTEMPT >&2")
	h.waitState(id, "D", time.Minute)
	if got := h.ok("mqstat", "--output", strconv.FormatInt(id, 10)); got != "out-"+strconv.FormatInt(id, 10)+"\n" {
		t.Errorf("--output printed %q", got)
	}
	if got := h.ok("mqstat", "--output", strconv.FormatInt(id, 10), "--stderr"); got != "err-1\n" {
		t.Errorf("--output --stderr printed %q", got)
	}
	waiting := h.submit("-p", "nothing-yet", "w", "true")
	r := h.run("mqstat", "--output", strconv.FormatInt(waiting, 10))
	if r.code != 1 || !strings.Contains(r.stderr, "has no output yet") {
		t.Errorf("--output of a job that has not run: %s", r)
	}
	h.ok("mqdel", strconv.FormatInt(waiting, 10))
	r = h.run("mqstat", "--output", strconv.FormatInt(waiting, 10))
	if r.code != 1 || !strings.Contains(r.stderr, "never ran: it has no output (state X (deleted))") {
		t.Errorf("--output of a job deleted before it ran: %s", r)
	}
	if r := h.run("mqstat", "--stderr"); r.code != 2 {
		t.Errorf("--stderr without --output: %s", r)
	}
}

// TestOutputLostToFileLimit: an agent that cannot write a job's whole
// output (RLIMIT_FSIZE gives it EFBIG, as a full disk gives ENOSPC) leaves
// the job done, and mqstat says the output was lost instead of showing a
// short output as if it were all. Per-job files (a stream file at its
// limit loses what goes into it after, reported lost the same way).
func TestOutputLostToFileLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0", "--output", "files")
	startLimitedAgent(t, h)
	id := h.submit("big", "head -c 1000000 /dev/zero; echo fine >&2")
	h.waitState(id, "D", 30*time.Second)
	ids := strconv.FormatInt(id, 10)
	if d := h.ok("mqstat", "-j", ids); !strings.Contains(d, "output lost:") || !strings.Contains(d, "file too large") {
		t.Errorf("mqstat -j does not say the output was lost:\n%s", d)
	}
	r := h.run("mqstat", "--output", ids)
	if r.code != 1 || !strings.Contains(r.stderr, "stdout was lost") || !strings.Contains(r.stderr, "file too large") || len(r.stdout) != 64<<10 {
		t.Errorf("mqstat --output: exit %d, %d bytes of stdout, stderr %q; want exit 1, the 65536 bytes kept, and the loss on stderr", r.code, len(r.stdout), r.stderr)
	}
	if got := h.ok("mqstat", "--output", ids, "--stderr"); got != "fine\n" {
		t.Errorf("--stderr printed %q", got)
	}
}

// startLimitedAgent starts an agent of h's CLS whose files may not grow
// past 64 KiB (ulimit -f: dash counts 512-byte blocks).
func startLimitedAgent(t *testing.T, h *harness) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `ulimit -f 128 && exec "$0" agent --site s --host limited --reconnect 5s`, filepath.Join(binDir, "cls"))
	cmd.Env = h.env()
	cmd.Dir = h.dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("start agent: %v", err)
	}
	go cmd.Wait()
}

// TestStreamsAfterFileLimit: an agent writing stream files (the default)
// whose file hits a file-size limit loses that job's output, reported
// lost, and keeps the outputs of the jobs after it in a new file, where
// every later output was lost before.
func TestStreamsAfterFileLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	startLimitedAgent(t, h)
	big := h.submit("big", "head -c 1000000 /dev/zero")
	h.waitState(big, "D", 30*time.Second)
	if d := h.ok("mqstat", "-j", strconv.FormatInt(big, 10)); !strings.Contains(d, "output lost:") || !strings.Contains(d, "file too large") {
		t.Errorf("mqstat -j does not say the output was lost:\n%s", d)
	}
	// mqstat --cat (--follow) of it says so too: a short or empty output
	// must not pass for all of it (TestOutputLostToFileLimit's, under files).
	for _, args := range [][]string{{"--cat", strconv.FormatInt(big, 10)}, {"--cat", strconv.FormatInt(big, 10), "--follow"}} {
		if r := h.run("mqstat", args...); r.code != 1 || !strings.Contains(r.stderr, "stdout was lost") || !strings.Contains(r.stderr, "file too large") {
			t.Errorf("mqstat %v: exit %d, %d bytes of stdout, stderr %q; want exit 1 and the loss on stderr", args, r.code, len(r.stdout), r.stderr)
		}
	}
	// A new file is tried at most once a second: the jobs after it keep
	// their output again, at the latest the first to start a second on.
	deadline := time.Now().Add(60 * time.Second)
	for n := 0; ; n++ {
		id := h.submit("small", fmt.Sprintf("echo kept %d", n))
		h.waitState(id, "D", 30*time.Second)
		r := h.run("mqstat", "--output", strconv.FormatInt(id, 10))
		if r.code == 0 && r.stdout == fmt.Sprintf("kept %d\n", n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs after the limit, none kept its output; the last: exit %d, %q, %q", n+1, r.code, r.stdout, r.stderr)
		}
	}
}

// TestLatin1Command: a command naming a Latin-1 file (café with 0xE9) runs
// with its exact bytes through mqsub, mqsub -f (command_bytes), the CLS and
// a placeholder: the file made is that name, and a job reading it finds it.
// mqstat shows the byte escaped; --json keeps it exactly.
func TestLatin1Command(t *testing.T) {
	t.Parallel()
	const name = "caf\xe9"
	h := newHarness(t)
	h.startCLS("--local", "1")
	mk := h.submit("mk", "printf hello > "+name)
	h.waitState(mk, "D", 30*time.Second)
	if b, err := os.ReadFile(filepath.Join(h.dir, name)); err != nil || string(b) != "hello" {
		t.Fatalf("the job did not make %q: %q, %v", name, b, err)
	}
	line := `{"target":"rd","prereqs":["mk"],"command_bytes":"` + base64.StdEncoding.EncodeToString([]byte("cat "+name+" && test -f "+name)) + `"}` + "\n"
	r := h.runIn(h.dir, strings.NewReader(line), "mqsub", "-f", "-")
	if r.code != 0 {
		t.Fatalf("mqsub -f: %s", r)
	}
	rd, _ := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
	h.waitState(rd, "D", 30*time.Second)
	if got := h.ok("mqstat", "--output", strconv.FormatInt(rd, 10)); got != "hello" {
		t.Errorf("the reading job printed %q", got)
	}
	if list := h.ok("mqstat"); !strings.Contains(list, `caf\xe9`) || strings.Contains(list, name) || strings.Contains(list, "\ufffd") {
		t.Errorf("mqstat does not show the byte escaped:\n%s", list)
	}
	var jobs []protocol.JobInfo
	if err := json.Unmarshal([]byte(h.ok("mqstat", "--json")), &jobs); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ID == mk && protocol.CommandOf(j.Command, j.CommandBytes) != "printf hello > "+name {
			t.Errorf("mqstat --json: %q", protocol.CommandOf(j.Command, j.CommandBytes))
		}
	}
	r = h.runIn(h.dir, strings.NewReader("{\"target\":\"x\",\"command\":\"ls "+name+"\"}\n"), "mqsub", "-f", "-")
	if r.code != 1 || !strings.Contains(r.stderr, "line 1: byte 0xe9") {
		t.Errorf("mqsub -f with a raw Latin-1 line: %s", r)
	}
}
