//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The workflow-system tests run the real Snakemake 7 and Makeflow (Debian's
// snakemake and coop-computing-tools, installed by scripts/setup.sh) on a CLS
// with local placeholders, through the profile in examples/snakemake/profile
// and scripts/mq-makeflow (docs/guide/workflows.md).

// wfSamples is the number of samples of the three-stage workflows: per sample
// a blast-like and a parse-like job, then one summary job: 101 jobs.
const wfSamples = 50

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// needTool skips the test when a workflow system is not installed.
func needTool(t *testing.T, name, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed (Debian package %s; scripts/setup.sh installs it as root)", name, pkg)
	}
}

// wfEnv is the environment of a workflow system run: the harness's MQ_HOME
// and the built mq commands first on PATH. CI=true makes Snakemake 7's cluster
// executor check its jobs every second instead of every ten.
func (h *harness) wfEnv() []string {
	env := []string{"PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH"), "CI=true"}
	for _, kv := range h.env() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "CI=") {
			env = append(env, kv)
		}
	}
	return env
}

// wfRun runs a workflow system's command in dir and returns how it ended.
func (h *harness) wfRun(dir string, timeout time.Duration, name string, args ...string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = h.wfEnv()
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ctx.Err() != nil {
		h.t.Fatalf("%s: timed out after %v:\nstdout:\n%s\nstderr:\n%s", name, timeout, tail(r.stdout), tail(r.stderr))
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	return r
}

// tail is the last 40 lines of s.
func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// checkOutputs checks the files of the three-stage workflow in dir: every
// blast and parse output of n samples and the summary.
func checkOutputs(t *testing.T, dir string, n int, blast, parse func(i int) string) {
	t.Helper()
	var want strings.Builder
	for i := range n {
		if got := readFile(t, filepath.Join(dir, blast(i))); got != fmt.Sprintf("hit-%d\n", i) {
			t.Errorf("%s = %q, want %q", blast(i), got, fmt.Sprintf("hit-%d\n", i))
		}
		p := fmt.Sprintf("parsed-%d\n", i)
		if got := readFile(t, filepath.Join(dir, parse(i))); got != p {
			t.Errorf("%s = %q, want %q", parse(i), got, p)
		}
		want.WriteString(p)
	}
	if got := readFile(t, filepath.Join(dir, "summary.txt")); got != want.String() {
		t.Errorf("summary.txt = %q, want %q", clip(got), clip(want.String()))
	}
}

// allDone checks that mqstat lists n jobs, all done.
func (h *harness) allDone(n int) {
	h.t.Helper()
	js := h.jobs("-s", "WQEDFBX")
	if len(js) != n {
		h.t.Errorf("mqstat lists %d jobs, want %d", len(js), n)
	}
	for _, j := range js {
		if j.State != "D" {
			h.t.Errorf("job %d (%s) is %s, want D", j.ID, j.Target, j.State)
		}
	}
}

func snakemakeArgs(root, dir string, config ...string) []string {
	return append([]string{
		"--profile", filepath.Join(root, "examples", "snakemake", "profile"),
		"-s", filepath.Join(root, "examples", "snakemake", "Snakefile"),
		"--directory", dir, "--config"}, config...)
}

// smkSamples is wfSamples for TestSnakemakeWorkflow, whose every rule is a
// Python process of its own: 41 jobs, still five times the placeholders.
const smkSamples = 20

// TestSnakemakeWorkflow runs the workflow, smkSamples samples, through the
// profile. Its time is Snakemake's: each cluster job starts a Python
// Snakemake of its own (~1 s of CPU; BENCHMARKS.md, "Snakemake and Makeflow
// on mq": a plain background launch is as slow), 198 s for 101 jobs in the
// test run on 2 cores and 10 s a job at load 27 with two busy loops, hence
// the long deadline.
func TestSnakemakeWorkflow(t *testing.T) {
	needTool(t, "snakemake", "snakemake")
	root := repoRoot(t)
	h := newHarness(t)
	h.startCLS("--local", "8")

	dir := filepath.Join(h.dir, "smk")
	r := h.wfRun(h.dir, 35*time.Minute, "snakemake", snakemakeArgs(root, dir, fmt.Sprintf("n=%d", smkSamples))...)
	if r.code != 0 {
		t.Fatalf("snakemake: exit %d\nstderr:\n%s", r.code, tail(r.stderr))
	}
	checkOutputs(t, dir, smkSamples,
		func(i int) string { return fmt.Sprintf("blast/%d.txt", i) },
		func(i int) string { return fmt.Sprintf("parse/%d.txt", i) })
	h.allDone(2*smkSamples + 1)
	// Every job went through mq-submit: its target is the external id.
	if !strings.Contains(r.stderr, "with external jobid 'smk.") {
		t.Errorf("snakemake did not report mq targets as external job ids:\n%s", tail(r.stderr))
	}
}

// TestSnakemakeGrouped runs the same workflow with Snakemake's job groups,
// as the guide advises for many short rules: each sample's blast and parse
// jobs in group g, 25 samples a group job, so 101 rules become 3 mq jobs
// (and 3 Snakemake processes instead of 101). --cores 1 is what one local
// placeholder holds: a group job asks for at most that, and Snakemake runs
// its members in series, where without it the group asks for 25 cores and
// waits for a placeholder that big.
func TestSnakemakeGrouped(t *testing.T) {
	needTool(t, "snakemake", "snakemake")
	root := repoRoot(t)
	h := newHarness(t)
	h.startCLS("--local", "2")

	dir := filepath.Join(h.dir, "smk")
	args := append(snakemakeArgs(root, dir, fmt.Sprintf("n=%d", wfSamples)),
		"--groups", "blast=g", "parse=g", "--group-components", "g=25", "--cores", "1")
	r := h.wfRun(h.dir, 20*time.Minute, "snakemake", args...)
	if r.code != 0 {
		t.Fatalf("snakemake: exit %d\nstderr:\n%s", r.code, tail(r.stderr))
	}
	checkOutputs(t, dir, wfSamples,
		func(i int) string { return fmt.Sprintf("blast/%d.txt", i) },
		func(i int) string { return fmt.Sprintf("parse/%d.txt", i) })
	h.allDone(2 + 1) // two group jobs and the summary
}

func TestSnakemakeFailedRule(t *testing.T) {
	needTool(t, "snakemake", "snakemake")
	root := repoRoot(t)
	h := newHarness(t)
	h.startCLS("--local", "4")

	dir := filepath.Join(h.dir, "smk")
	r := h.wfRun(h.dir, 10*time.Minute, "snakemake", snakemakeArgs(root, dir, "n=3", "fail=1")...)
	if r.code == 0 {
		t.Fatalf("snakemake exited 0 with a failing rule:\n%s", tail(r.stderr))
	}
	if !strings.Contains(r.stderr, "Error in rule parse") {
		t.Errorf("snakemake did not report the failed rule:\n%s", tail(r.stderr))
	}
	if _, err := os.Stat(filepath.Join(dir, "parse", "1.txt")); err == nil {
		t.Errorf("parse/1.txt exists after its rule failed")
	}
	if _, err := os.Stat(filepath.Join(dir, "summary.txt")); err == nil {
		t.Errorf("summary.txt exists after a rule it needs failed")
	}
	js := h.jobs("-s", "WQEDFBX")
	failed := 0
	for _, j := range js {
		if strings.Contains(j.Target, ".summary.") {
			t.Errorf("the summary job was submitted: %+v", j)
		}
		if j.State == "F" {
			failed++
			if !strings.Contains(j.Target, ".parse.") {
				t.Errorf("job %d (%s) failed, want only the parse job of sample 1", j.ID, j.Target)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d failed jobs in mq, want 1: %+v", failed, js)
	}
}

// TestSnakemakeRestartTimes: with --restart-times Snakemake resubmits a
// failed job under the same target; mq-status answers for the new job, so
// a rule that fails once and then succeeds ends the run well.
func TestSnakemakeRestartTimes(t *testing.T) {
	needTool(t, "snakemake", "snakemake")
	root := repoRoot(t)
	h := newHarness(t)
	h.startCLS("--local", "2")

	dir := filepath.Join(h.dir, "smk")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sf := `rule flaky:
    output: "flaky.txt"
    resources: attempt=lambda w, attempt: attempt
    shell: "test {resources.attempt} -ge 2 && echo ok > {output}"
`
	if err := os.WriteFile(filepath.Join(dir, "Snakefile"), []byte(sf), 0o644); err != nil {
		t.Fatal(err)
	}
	r := h.wfRun(h.dir, 10*time.Minute, "snakemake", "--profile", filepath.Join(root, "examples", "snakemake", "profile"),
		"-s", filepath.Join(dir, "Snakefile"), "--directory", dir, "--restart-times", "1")
	if r.code != 0 {
		t.Fatalf("snakemake: exit %d\nstderr:\n%s", r.code, tail(r.stderr))
	}
	if got := readFile(t, filepath.Join(dir, "flaky.txt")); got != "ok\n" {
		t.Errorf("flaky.txt = %q, want %q", got, "ok\n")
	}
	var states []string
	js := h.jobs("-s", "WQEDFBX")
	for _, j := range js {
		states = append(states, j.State)
		if j.Target != js[0].Target {
			t.Errorf("job %d has target %s, want the first attempt's %s", j.ID, j.Target, js[0].Target)
		}
	}
	if strings.Join(states, "") != "FD" {
		t.Errorf("jobs in states %v, want a failed attempt then a done one: %+v", states, js)
	}
}

// TestSnakemakeCancel interrupts Snakemake while its jobs run: its
// --cluster-cancel (mq-cancel) deletes them in mq, killing them.
//
// Snakemake 7 cancels the jobs it has registered, and registers one
// (appends it to the list cancel() passes to mq-cancel) only after it has
// logged its submission and written its own files; mq shows the job
// executing before that. An interrupt in between, which a busy machine
// makes likely, leaves that job out: Snakemake's window, not mq's. So the
// test interrupts once Snakemake has asked mq-status about every job, which
// it does only of jobs it registered: the profile is copied with mq-status
// behind a wrapper that notes the targets asked about.
func TestSnakemakeCancel(t *testing.T) {
	needTool(t, "snakemake", "snakemake")
	root := repoRoot(t)
	h := newHarness(t)
	h.startCLS("--local", "4")

	dir := filepath.Join(h.dir, "smk")
	profile, asked := statusNotingProfile(t, root, h.dir)
	args := snakemakeArgs(root, dir, "n=3", "sleep=600")
	args[1] = profile // after "--profile"
	cmd := exec.Command("snakemake", args...)
	cmd.Env = h.wfEnv()
	cmd.Dir = h.dir
	var errb syncBuffer
	cmd.Stdout, cmd.Stderr = &errb, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	waitFor(t, 5*time.Minute, func() error {
		js := h.jobs("-s", "E")
		if len(js) != 3 {
			return fmt.Errorf("%d jobs executing, want 3", len(js))
		}
		noted, err := os.ReadFile(asked)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		for _, j := range js {
			if !slices.Contains(strings.Fields(string(noted)), j.Target) {
				return fmt.Errorf("snakemake has not asked mq-status about job %d (%s): not registered for its cancel yet", j.ID, j.Target)
			}
		}
		return nil
	})
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(3 * time.Minute):
		t.Fatalf("snakemake did not exit after SIGINT:\n%s", tail(errb.String()))
	}
	waitFor(t, time.Minute, func() error {
		js := h.jobs("-s", "WQEDFBX")
		for _, j := range js {
			if j.State != "X" {
				return fmt.Errorf("job %d (%s) is %s, want X (deleted by mq-cancel)", j.ID, j.Target, j.State)
			}
		}
		if len(js) != 3 {
			return fmt.Errorf("%d jobs, want 3", len(js))
		}
		return nil
	})
}

// statusNotingProfile copies the Snakemake profile into dir with its
// mq-status behind a wrapper that appends each target asked about to the
// file it returns, and returns the copy's path.
func statusNotingProfile(t *testing.T, root, dir string) (profile, asked string) {
	t.Helper()
	src := filepath.Join(root, "examples", "snakemake", "profile")
	profile, asked = filepath.Join(dir, "profile"), filepath.Join(dir, "status-asked")
	if err := os.CopyFS(profile, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$1\" >> '%s'\nexec '%s' \"$@\"\n",
		asked, filepath.Join(src, "mq-status"))
	if err := os.WriteFile(filepath.Join(profile, "mq-status"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return profile, asked
}

// makeflowFile writes the three-stage workflow as a Makeflow file.
func makeflowFile(t *testing.T, dir string, n int) {
	t.Helper()
	var b strings.Builder
	var parsed []string
	for i := range n {
		fmt.Fprintf(&b, "blast.%d.txt:\n\techo hit-%d > blast.%d.txt\n\n", i, i, i)
		fmt.Fprintf(&b, "parse.%d.txt: blast.%d.txt\n\tsed 's/^hit/parsed/' blast.%d.txt > parse.%d.txt\n\n", i, i, i, i)
		parsed = append(parsed, fmt.Sprintf("parse.%d.txt", i))
	}
	fmt.Fprintf(&b, "summary.txt: %s\n\tcat %s > summary.txt\n", strings.Join(parsed, " "), strings.Join(parsed, " "))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wf.mf"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMakeflowWorkflow(t *testing.T) {
	needTool(t, "makeflow", "coop-computing-tools")
	root := repoRoot(t)
	h := newHarness(t)
	h.startCLS("--local", "8")

	dir := filepath.Join(h.dir, "mf")
	makeflowFile(t, dir, wfSamples)
	r := h.wfRun(dir, 15*time.Minute, filepath.Join(root, "scripts", "mq-makeflow"), "wf.mf")
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, "failed") {
		t.Fatalf("makeflow: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, tail(r.stdout), tail(r.stderr))
	}
	checkOutputs(t, dir, wfSamples,
		func(i int) string { return fmt.Sprintf("blast.%d.txt", i) },
		func(i int) string { return fmt.Sprintf("parse.%d.txt", i) })
	h.allDone(2*wfSamples + 1)
}

// TestMakeflowFailedRule: a rule that fails (and one that ends the wrapper's
// shell with `exit`) is reported failed by Makeflow, with its exit code, and
// its mq job is F with that exit code. (Makeflow 9.9 itself exits 0 after a
// failed rule, with -T local too; it says so on its output and in its log.)
func TestMakeflowFailedRule(t *testing.T) {
	needTool(t, "makeflow", "coop-computing-tools")
	root := repoRoot(t)
	h := newHarness(t)
	h.startCLS("--local", "4")

	dir := filepath.Join(h.dir, "mf")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// No rule depends on a failing one: with -T cluster Makeflow then spins
	// for ever after the failure, with a plain background-launch submit
	// command too (with -T local it ends); docs/guide/workflows.md.
	mf := "ok.txt:\n\techo ok > ok.txt\n\nbad.txt: ok.txt\n\tsh -c 'exit 3' && touch bad.txt\n\nworse.txt: ok.txt\n\texit 4\n"
	if err := os.WriteFile(filepath.Join(dir, "wf.mf"), []byte(mf), 0o644); err != nil {
		t.Fatal(err)
	}
	r := h.wfRun(dir, 10*time.Minute, filepath.Join(root, "scripts", "mq-makeflow"), "-r", "0", "wf.mf")
	out := r.stdout + r.stderr
	for _, want := range []string{"failed with exit code 3", "failed with exit code 4"} {
		if !strings.Contains(out, want) {
			t.Errorf("makeflow output lacks %q:\n%s", want, tail(out))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.txt")); err == nil {
		t.Errorf("bad.txt exists although its rule failed")
	}
	exits := map[int]bool{}
	for _, j := range h.jobs("-s", "WQEDFBX") {
		if j.State == "F" && j.Exit != nil {
			exits[*j.Exit] = true
		}
	}
	if !exits[3] || !exits[4] || len(exits) != 2 {
		t.Errorf("failed mq jobs' exit codes %v, want 3 and 4", exits)
	}
}
