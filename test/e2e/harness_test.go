//go:build e2e

// Package e2e drives the real mq binaries (cls, mqsub, mqstat, mqdel) the way
// a user does: built once in TestMain, run with os/exec, each test with its
// own $MQ_HOME and its own CLS process. Run with
//
//	go test -tags e2e -count=1 ./test/e2e/
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
	"github.com/mq-hpc/mq/test/internal/fds"
)

// binDir holds the binaries built by TestMain.
var binDir string

func TestMain(m *testing.M) {
	fds.CloseInherited() // the suite's flock must not outlive it in a leftover CLS
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	binDir, err = os.MkdirTemp("", "mqe2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	build := exec.Command("go", "build", "-o", binDir+string(os.PathSeparator),
		"./cmd/cls", "./cmd/mqsub", "./cmd/mqstat", "./cmd/mqdel", "./cmd/mqhold", "./cmd/mqrls", "./cmd/mqalter", "./cmd/mqwait", "./cmd/mqsim", "./cmd/mqagent")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build failed: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// harness is one test's world: an MQ_HOME, a working directory for jobs, and
// at most one CLS at a time.
type harness struct {
	t    *testing.T
	home string // $MQ_HOME
	dir  string // default working directory of commands (the "submitter's cwd")
	cls  *clsProc
}

// clsProc is a running `cls serve`.
type clsProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited and been reaped
}

func (c *clsProc) pid() int { return c.cmd.Process.Pid }

func (c *clsProc) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newHarness makes a fresh MQ_HOME (short: the socket path must stay under
// ~100 bytes) and a job directory. Cleanup kills every process that carries
// this MQ_HOME in its environment (the CLS, its placeholders, their jobs),
// then removes both directories.
func newHarness(t *testing.T) *harness {
	t.Helper()
	home, err := os.MkdirTemp("", "mqe2e-")
	if err != nil {
		t.Fatal(err)
	}
	if len(filepath.Join(home, "cls.sock")) >= 100 { // a long $TMPDIR
		os.Remove(home)
		if home, err = os.MkdirTemp("/tmp", "mqe2e-"); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.MkdirTemp("", "mqe2e-work")
	if err != nil {
		t.Fatal(err)
	}
	// Resolve symlinks so paths compare equal to what `pwd -P` prints.
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	if h, err := filepath.EvalSymlinks(home); err == nil {
		home = h
	}
	h := &harness{t: t, home: home, dir: dir}
	t.Cleanup(func() {
		if t.Failed() {
			h.dumpLogs()
		}
		h.killAll()
		os.RemoveAll(home)
		os.RemoveAll(dir)
	})
	return h
}

func (h *harness) sock() string { return filepath.Join(h.home, "cls.sock") }

// env is the environment of every command the test runs.
func (h *harness) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MQ_") {
			env = append(env, kv)
		}
	}
	return append(env, "MQ_HOME="+h.home)
}

func (h *harness) dumpLogs() {
	if h.cls != nil {
		h.t.Logf("cls stderr:\n%s", h.cls.stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(h.home, "cls.log")); err == nil {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		h.t.Logf("cls.log (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// startCLS runs `cls serve ARGS...` on this harness's home and waits until
// its socket accepts connections. The process is killed in cleanup.
func (h *harness) startCLS(args ...string) *clsProc {
	h.t.Helper()
	if h.cls != nil && !h.cls.exited() {
		h.t.Fatalf("startCLS: a CLS (pid %d) is still running", h.cls.pid())
	}
	cmd := exec.Command(filepath.Join(binDir, "cls"), append([]string{"serve"}, args...)...)
	cmd.Env = h.env()
	cmd.Dir = h.dir
	c := &clsProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.stderr, c.stderr
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start cls: %v", err)
	}
	go func() {
		cmd.Wait()
		close(c.done)
	}()
	h.cls = c
	waitFor(h.t, 60*time.Second, func() error {
		if c.exited() {
			return fmt.Errorf("cls exited early (%v): %s", cmd.ProcessState, c.stderr.String())
		}
		conn, err := net.Dial("unix", h.sock())
		if err != nil {
			return fmt.Errorf("cls socket not ready: %v", err)
		}
		conn.Close()
		return nil
	})
	if c.exited() {
		h.t.Fatalf("cls exited right after starting: %s", c.stderr.String())
	}
	return c
}

// stopCLS sends sig to the CLS and waits up to timeout for it to exit; it
// returns how long the exit took.
func (h *harness) stopCLS(sig syscall.Signal, timeout time.Duration) time.Duration {
	h.t.Helper()
	c := h.cls
	if c == nil || c.exited() {
		h.t.Fatal("stopCLS: no CLS running")
	}
	start := time.Now()
	if err := c.cmd.Process.Signal(sig); err != nil {
		h.t.Fatalf("signal cls: %v", err)
	}
	select {
	case <-c.done:
	case <-time.After(timeout):
		h.t.Fatalf("cls did not exit within %v of %v", timeout, sig)
	}
	return time.Since(start)
}

// killAll SIGKILLs every live process whose environment holds this
// harness's MQ_HOME: the CLS, local placeholders (also orphaned ones from a
// killed CLS) and the jobs they started. Only this test's processes carry
// that (unique, temporary) MQ_HOME.
func (h *harness) killAll() {
	if h.cls != nil && !h.cls.exited() {
		h.cls.cmd.Process.Kill()
		select {
		case <-h.cls.done:
		case <-time.After(time.Minute):
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		pids := h.ownProcs()
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ownProcs lists live (non-zombie) processes started for this harness.
func (h *harness) ownProcs() []int {
	return procsWithEnv("MQ_HOME=" + h.home)
}

// result is how a command ended.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, clip(r.stdout), clip(r.stderr))
}

func clip(s string) string {
	if len(s) > 500 {
		return s[:500] + "..."
	}
	return s
}

// run runs one of the mq commands in the harness's job directory.
func (h *harness) run(name string, args ...string) result {
	h.t.Helper()
	return h.runIn(h.dir, nil, name, args...)
}

// runIn runs an mq command with a working directory and stdin, and fails
// the test if it times out, crashes or cannot start.
func (h *harness) runIn(dir string, stdin io.Reader, name string, args ...string) result {
	h.t.Helper()
	r, err := runBin(90*time.Second, h.env(), dir, stdin, name, args...)
	var ee *exec.ExitError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		h.t.Fatalf("%s %s: timed out after 90s: %s", name, strings.Join(args, " "), r)
	case errors.As(err, &ee) && r.code < 0:
		h.t.Fatalf("%s %s: crashed (%v): %s", name, strings.Join(args, " "), ee, r)
	case err != nil && !errors.As(err, &ee):
		h.t.Fatalf("%s: %v", name, err)
	}
	return r
}

// runBin runs one of the built commands, killed after timeout, and returns
// what it printed and its exit code, with the error of the run (wrapping
// context.DeadlineExceeded when it timed out). It never fails the test:
// callers beside a test's goroutine use it too.
func runBin(timeout time.Duration, env []string, dir string, stdin io.Reader, name string, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, name), args...)
	cmd.Env, cmd.Dir, cmd.Stdin = env, dir, stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
	default:
		r.code = -1
	}
	return r, err
}

// ok runs an mq command and fails the test unless it exits 0 with an empty
// stderr; it returns stdout.
func (h *harness) ok(name string, args ...string) string {
	h.t.Helper()
	r := h.run(name, args...)
	if r.code != 0 {
		h.t.Fatalf("%s %s: %s", name, shortArgs(args), r)
	}
	return r.stdout
}

func shortArgs(args []string) string {
	s := strings.Join(args, " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// submit runs mqsub ARGS... and returns the printed job id.
func (h *harness) submit(args ...string) int64 {
	h.t.Helper()
	out := h.ok("mqsub", args...)
	id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		h.t.Fatalf("mqsub %s printed %q, not a job id", shortArgs(args), out)
	}
	return id
}

// jobInfo is one job in `mqstat --json`.
type jobInfo struct {
	ID        int64    `json:"id"`
	Queue     string   `json:"queue"`
	Target    string   `json:"target"`
	Prereqs   []string `json:"prereqs"`
	State     string   `json:"state"`
	Attempts  int      `json:"attempts"`
	Exit      *int     `json:"exit"`
	Site      string   `json:"site"`
	Host      string   `json:"host"`
	Submitted string   `json:"submitted"`
	Started   string   `json:"started"`
	Finished  string   `json:"finished"`
	Command   string   `json:"command"`
	Cwd       string   `json:"cwd"`
	Est       float64  `json:"est"`
	Reason    string   `json:"reason"`
}

// jobDetail is `mqstat -j ID --json`.
type jobDetail struct {
	jobInfo
	Placeholder int64  `json:"placeholder"`
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	// StdoutStream, StderrStream: where the current attempt's outputs lie
	// when its placeholder wrote them to a stream file.
	StdoutStream *protocol.StreamExtent `json:"stdout_stream"`
	StderrStream *protocol.StreamExtent `json:"stderr_stream"`
	WaitingOn    []struct {
		Target   string         `json:"target"`
		Complete bool           `json:"complete"`
		Counts   map[string]int `json:"counts"`
	} `json:"waiting_on"`
	History []struct {
		Attempt  int    `json:"attempt"`
		Site     string `json:"site"`
		Host     string `json:"host"`
		Started  string `json:"started"`
		Finished string `json:"finished"`
		Exit     *int   `json:"exit"`
		Reason   string `json:"reason"`
	} `json:"history"`
}

// jobs lists jobs with `mqstat --json ARGS...` (every state when no -s).
func (h *harness) jobs(args ...string) []jobInfo {
	h.t.Helper()
	hasStates := false
	for _, a := range args {
		if a == "-s" {
			hasStates = true
		}
	}
	if !hasStates {
		args = append(args, "-s", "WQEDFBX")
	}
	out := h.ok("mqstat", append([]string{"--json"}, args...)...)
	var js []jobInfo
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		h.t.Fatalf("mqstat --json: %v in %q", err, clip(out))
	}
	return js
}

// job shows one job with `mqstat -j ID --json`.
func (h *harness) job(id int64) jobDetail {
	h.t.Helper()
	out := h.ok("mqstat", "-j", strconv.FormatInt(id, 10), "--json")
	var d jobDetail
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		h.t.Fatalf("mqstat -j %d --json: %v in %q", id, err, clip(out))
	}
	if d.ID != id {
		h.t.Fatalf("mqstat -j %d showed job %d", id, d.ID)
	}
	return d
}

// summary is `mqstat --summary --json`: queue -> state letter -> jobs.
func (h *harness) summary() map[string]map[string]int {
	h.t.Helper()
	out := h.ok("mqstat", "--summary", "--json")
	var qs []struct {
		Queue  string         `json:"queue"`
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal([]byte(out), &qs); err != nil {
		h.t.Fatalf("mqstat --summary --json: %v in %q", err, clip(out))
	}
	m := map[string]map[string]int{}
	for _, q := range qs {
		m[q.Queue] = q.Counts
	}
	return m
}

// waitState polls until job id is in one of states and returns its detail.
func (h *harness) waitState(id int64, states string, timeout time.Duration) jobDetail {
	h.t.Helper()
	var d jobDetail
	waitFor(h.t, timeout, func() error {
		if now, err := h.askJob(id); err == nil && !strings.Contains(states, now.State) {
			return fmt.Errorf("job %d is %s (attempts %d, reason %q), want one of %s", id, now.State, now.Attempts, now.Reason, states)
		}
		d = h.job(id) // as mqstat -j shows it, once there
		if strings.Contains(states, d.State) {
			return nil
		}
		return fmt.Errorf("job %d is %s (attempts %d, reason %q), want one of %s", id, d.State, d.Attempts, d.Reason, states)
	})
	return d
}

// askJob asks the CLS for job id from this process, as mqstat -j does.
// waitState polls with it: an mqstat process each time cost ~50 ms of
// CPU, several times a second through most of the suite, taken from the
// suites beside this one in CI. Any failure (a CLS of another user, one
// stopped) leaves the poll to mqstat, as before.
func (h *harness) askJob(id int64) (protocol.JobDetail, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, h.home, protocol.RoleUser, "e2e-test")
	if err != nil {
		return protocol.JobDetail{}, err
	}
	defer cl.Close()
	return client.Do(ctx, cl, protocol.OpJob, protocol.JobQuery{ID: id})
}

// waitFor polls cond until it returns nil, failing the test with cond's
// last error after timeout.
func waitFor(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	delay := 20 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %v", timeout, err)
		}
		time.Sleep(delay)
		delay = min(delay*2, 250*time.Millisecond)
	}
}

// parseTime reads an mqstat time.
func parseTime(t *testing.T, what, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s: bad time %q: %v", what, s, err)
	}
	return tm
}

// readFile returns a file's contents, failing the test if it cannot.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readPid reads a pid a job wrote to a file.
func readPid(t *testing.T, path string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, path)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// waitFile waits until path exists and is not empty.
func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, func() error {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if st.Size() == 0 {
			return fmt.Errorf("%s is empty", path)
		}
		return nil
	})
}

// oneLineErr checks that a failed command printed exactly one line on
// stderr, starting "name: ", and nothing on stdout.
func oneLineErr(t *testing.T, name string, r result) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if r.stderr == "" || len(lines) != 1 || !strings.HasPrefix(r.stderr, name+": ") || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("%s: want one line \"%s: message\" on stderr, got %q", name, name, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("%s: nothing expected on stdout after an error, got %q", name, clip(r.stdout))
	}
}

// Process inspection through /proc (Linux).

// procStat is what /proc/PID/stat tells about a process.
type procStat struct {
	pid, ppid, pgid int
	state           byte
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgid, _ := strconv.Atoi(f[2])
	return procStat{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0]}, true
}

// allProcs lists the live (non-zombie) processes.
func allProcs() []procStat {
	ents, _ := os.ReadDir("/proc")
	var out []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.state != 'Z' && st.state != 'X' {
			out = append(out, st)
		}
	}
	return out
}

// alive reports whether pid is a live, non-zombie process.
func alive(pid int) bool {
	st, ok := readStat(pid)
	return ok && st.state != 'Z' && st.state != 'X'
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []int {
	var out []int
	for _, p := range allProcs() {
		if p.pgid == pgid {
			out = append(out, p.pid)
		}
	}
	return out
}

// childrenOf lists the live children of pid.
func childrenOf(pid int) []int {
	var out []int
	for _, p := range allProcs() {
		if p.ppid == pid {
			out = append(out, p.pid)
		}
	}
	return out
}

// cmdline returns a process's command line with spaces between arguments.
func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// procsWithEnv lists live processes whose environment has the entry kv.
func procsWithEnv(kv string) []int {
	self := os.Getpid()
	var out []int
	for _, p := range allProcs() {
		if p.pid == self {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
		if err != nil {
			continue
		}
		for _, e := range bytes.Split(b, []byte{0}) {
			if string(e) == kv {
				out = append(out, p.pid)
				break
			}
		}
	}
	return out
}

// agents lists the live `cls agent` children of the CLS.
func (h *harness) agents() []int {
	var out []int
	for _, pid := range childrenOf(h.cls.pid()) {
		if strings.Contains(cmdline(pid), " agent ") {
			out = append(out, pid)
		}
	}
	return out
}
