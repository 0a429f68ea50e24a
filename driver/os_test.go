package driver

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// mode starts a driver one way: running jobs here, or through an
// in-process CLS with placeholders. The tests below hold in both.
type mode struct {
	name  string
	start func(t *testing.T, cfg Config) *Driver
}

func modes() []mode {
	return []mode{
		{"local", func(t *testing.T, cfg Config) *Driver { return startLocal(t, cfg) }},
		{"cls", func(t *testing.T, cfg Config) *Driver {
			return startCLSDriver(t, newTestCLS(t, 2, 2), cfg)
		}},
		// Placeholders as remote ones are: output copied to the CLS.
		{"cls-staged", func(t *testing.T, cfg Config) *Driver {
			return startCLSDriver(t, newTestCLSStaging(t, 2, 2, true), cfg)
		}},
	}
}

// shOutput is what os/exec gives for line run as placeholders run it.
func shOutput(t *testing.T, dir, line string) (stdout, stderr []byte) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Run()
	return o.Bytes(), e.Bytes()
}

// TestOutputMatchesLocalRun: a job's stdout and stderr read through Result
// are, byte for byte, what os/exec gets from the same line, in both modes:
// every byte value, no output, and output over the 1 MiB a read carries.
func TestOutputMatchesLocalRun(t *testing.T) {
	t.Parallel()
	lines := []string{
		"printf " + stdinFormat(allBytes()) + "; echo to-stderr >&2", // every byte value
		"true",
		"printf 'no newline'; printf 'e1\\ne2' >&2; exit 3",
		"cat blob; cat blob >&2; cat blob",
	}
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			blob := make([]byte, 1500000) // 3 MB of stdout: reads of several pieces
			rand.Read(blob)
			if err := os.WriteFile(filepath.Join(dir, "blob"), blob, 0o644); err != nil {
				t.Fatal(err)
			}
			d := m.start(t, Config{Dir: dir})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for _, line := range lines {
				k, err := d.Exec(ctx, line)
				if err != nil {
					t.Fatal(err)
				}
				res, _ := d.WaitForOne(ctx, k)
				out, err := res.Stdout(ctx)
				if err != nil {
					t.Fatalf("%q: stdout: %v", line, err)
				}
				errb, err := res.Stderr(ctx)
				if err != nil {
					t.Fatalf("%q: stderr: %v", line, err)
				}
				wantOut, wantErr := shOutput(t, dir, line)
				if !bytes.Equal(out, wantOut) || !bytes.Equal(errb, wantErr) {
					t.Errorf("%q: stdout %d bytes, stderr %d; os/exec gives %d and %d; equal: %v %v",
						line, len(out), len(errb), len(wantOut), len(wantErr), bytes.Equal(out, wantOut), bytes.Equal(errb, wantErr))
				}
			}
		})
	}
}

// TestCmdLikeExec: Cmd's argv, Dir, Env, Stdin (bytes and file), Output,
// CombinedOutput and ExitError behave in both modes as exec.Cmd's do.
func TestCmdLikeExec(t *testing.T) {
	t.Parallel()
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			d := m.start(t, Config{Dir: t.TempDir()})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			// argv: every argument arrives as given.
			out, err := d.CommandContext(ctx, "printf", append([]string{`%s\0`}, nasty...)...).Output()
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.Join(nasty, "\x00") + "\x00"; string(out) != want {
				t.Errorf("arguments came back as %q", out)
			}
			// Dir, Env and Stdin from bytes.
			stdin := allBytes()
			c := d.CommandContext(ctx, "sh", "-c", `pwd; printf '%s|%s\n' "$GREETING" "$MQ_TARGET"; cat`)
			c.Dir = dir
			c.Env = []string{"GREETING=hello 'world' $x"}
			c.Stdin = bytes.NewReader(stdin)
			out, err = c.Output()
			if err != nil {
				t.Fatal(err)
			}
			want := dir + "\nhello 'world' $x|driver\n" + string(stdin)
			if string(out) != want {
				t.Errorf("Dir/Env/Stdin: got %q\nwant %q", out, want)
			}
			if c.Result == nil || c.Result.Exit != 0 || c.Result.Attempt != 1 || c.Result.Host == "" || c.Result.Site == "" ||
				c.Result.Started.IsZero() || c.Result.Finished.Before(c.Result.Started) {
				t.Errorf("Result: %+v", c.Result)
			}
			// Stdin from a file.
			in := filepath.Join(dir, "in put")
			os.WriteFile(in, []byte("file data"), 0o644)
			c = d.CommandContext(ctx, "cat")
			c.StdinFile = in
			if out, err := c.Output(); err != nil || string(out) != "file data" {
				t.Errorf("StdinFile: %q, %v", out, err)
			}
			// Output: a non-zero exit is an *ExitError carrying stderr.
			_, err = d.CommandContext(ctx, "sh", "-c", "echo bad >&2; exit 3").Output()
			var ee *ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 3 || string(ee.Stderr) != "bad\n" {
				t.Errorf("Output of exit 3: %v (%+v)", err, ee)
			}
			// CombinedOutput interleaves as written.
			out, err = d.CommandContext(ctx, "sh", "-c", "echo 1; echo 2 >&2; echo 3").CombinedOutput()
			if err != nil || string(out) != "1\n2\n3\n" {
				t.Errorf("CombinedOutput: %q, %v", out, err)
			}
			// Errors surface from Start, as exec.Cmd's do.
			if err := d.CommandContext(ctx, "").Run(); err == nil {
				t.Error("empty program: no error")
			}
			c = d.CommandContext(ctx, "cat")
			c.Stdin = bytes.NewReader(make([]byte, MaxStdin+1))
			if err := c.Run(); err == nil || !strings.Contains(err.Error(), "MaxStdin") {
				t.Errorf("stdin over MaxStdin: %v", err)
			}
			c = d.CommandContext(ctx, "true")
			c.Env = []string{"BAD NAME=1"}
			if err := c.Run(); err == nil {
				t.Error("bad env name: no error")
			}
			c = d.CommandContext(ctx, "true")
			if err := c.Wait(); !errors.Is(err, ErrCmdNotStarted) {
				t.Errorf("Wait before Start: %v", err)
			}
			c.Run()
			if err := c.Start(); !errors.Is(err, ErrCmdStarted) {
				t.Errorf("second Start: %v", err)
			}
		})
	}
}

// alive reports whether a process exists (a zombie not yet reaped counts).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// startSleeper issues a job that records its pid and sleeps, and returns
// the pid once it runs.
func startSleeper(t *testing.T, ctx context.Context, d *Driver, dir string) (Key, int) {
	t.Helper()
	pidFile := filepath.Join(dir, fmt.Sprintf("pid-%d", time.Now().UnixNano()))
	k, err := d.Exec(ctx, "echo $$ > "+Quote(pidFile)+".tmp && mv "+Quote(pidFile)+".tmp "+Quote(pidFile)+" && exec sleep 120")
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	waitUntil(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0 && alive(pid)
	})
	return k, pid
}

// goneWithin fails unless the process is gone within limit: a condition
// polled against a deadline.
func goneWithin(t *testing.T, pid int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for alive(pid) {
		if time.Since(start) > limit {
			t.Fatalf("job process %d still alive %v after its context was cancelled", pid, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// TestCancelKillsJob: cancelling the context of an Exec, an ExecSync or a
// wait deletes the job and kills its process within a second, in both
// modes, and the job ends as deleted with an error wrapping the context's.
func TestCancelKillsJob(t *testing.T) {
	t.Parallel()
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			d := m.start(t, Config{Dir: dir})
			bg, stop := context.WithTimeout(context.Background(), 2*time.Minute)
			defer stop()

			// Exec's context.
			ctx, cancel := context.WithCancel(bg)
			k, pid := startSleeper(t, ctx, d, dir)
			cancel()
			took := goneWithin(t, pid, time.Second)
			res, err := d.WaitForOne(bg, k)
			var je *JobError
			if !errors.Is(err, context.Canceled) || !errors.As(err, &je) || je.State != "X" || res.Exit != -1 {
				t.Errorf("cancelled Exec: %+v, %v", res, err)
			}
			t.Logf("%s: Exec's context cancelled: job killed in %v", m.name, took)

			// A wait's context: the job is given up, killed, its result dropped.
			k, pid = startSleeper(t, bg, d, dir)
			wctx, wcancel := context.WithCancel(bg)
			waited := make(chan error, 1)
			go func() { _, err := d.WaitForOne(wctx, k); waited <- err }()
			wcancel()
			if err := <-waited; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled wait: %v", err)
			}
			took = goneWithin(t, pid, time.Second)
			t.Logf("%s: wait's context cancelled: job killed in %v", m.name, took)
			waitUntil(t, func() bool { return d.Pending() == 0 })
			if rs, err := d.WaitForAll(bg); len(rs) != 0 || err != nil {
				t.Errorf("a given-up job's result was kept: %+v, %v", rs, err)
			}

			// ExecSync's context, cancelled while the job waits in the buffer
			// behind a prerequisite: it never runs.
			sctx, scancel := context.WithCancel(bg)
			go func() {
				waitUntil(t, func() bool { return d.Pending() == 1 })
				scancel()
			}()
			if _, err := d.ExecSync(sctx, "touch never-ran", Prereqs("nothing-yet")); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled ExecSync: %v", err)
			}
			waitUntil(t, func() bool { return d.Pending() == 0 })
			if _, err := os.Stat(filepath.Join(dir, "never-ran")); err == nil {
				t.Error("a job cancelled before it ran ran")
			}
		})
	}
}

// TestResultsAsTheyEnd: Results yields each job once, in the order they
// end, collected; a context ending stops it and deletes what is left.
func TestResultsAsTheyEnd(t *testing.T) {
	t.Parallel()
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			d := m.start(t, Config{Dir: dir})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			slow, _ := d.Exec(ctx, "while [ ! -e go ]; do sleep 0.01; done; exit 1")
			var fast []Key
			for i := 0; i < 20; i++ {
				k, _ := d.Exec(ctx, fmt.Sprintf("exit %d", 10+i))
				fast = append(fast, k)
			}
			seen := map[Key]int{}
			var order []Key
			for res, err := range d.Results(ctx) {
				if res.Key == slow {
					if err != nil || res.Exit != 1 {
						t.Errorf("slow job: %+v %v", res, err)
					}
				} else if err != nil || res.Exit < 10 {
					t.Errorf("fast job: %+v %v", res, err)
				}
				seen[res.Key]++
				order = append(order, res.Key)
				if len(order) == len(fast) {
					os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) // only now may the slow one end
				}
			}
			if len(seen) != 21 || len(order) != 21 || order[20] != slow {
				t.Errorf("results %v (seen %v)", order, seen)
			}
			if _, err := d.WaitForOne(ctx, slow); err == nil {
				t.Error("a result yielded by Results was not collected")
			}
			// A context ending ends the loop and deletes the rest.
			_, pid := startSleeper(t, ctx, d, dir)
			rctx, rcancel := context.WithCancel(ctx)
			time.AfterFunc(10*time.Millisecond, rcancel)
			n := 0
			for res, err := range d.Results(rctx) {
				n++
				if !errors.Is(err, context.Canceled) || res.Exit != -1 {
					t.Errorf("after cancel: %+v %v", res, err)
				}
			}
			if n != 1 {
				t.Errorf("%d results after cancel, want the context's error alone", n)
			}
			goneWithin(t, pid, 5*time.Second)
		})
	}
}

// TestOutDirRuns: local mode makes OutDir, and a second run with the same
// OutDir leaves the first one's files alone.
func TestOutDirRuns(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "not", "yet")
	var dirs []string
	for run := 0; run < 2; run++ {
		d, err := New(Config{OutDir: out})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := d.ExecSync(context.Background(), fmt.Sprintf("echo run %d", run)); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d.RunDir())
		d.Stop(context.Background())
	}
	if dirs[0] == dirs[1] {
		t.Fatalf("both runs wrote to %s", dirs[0])
	}
	for run, dir := range dirs {
		if filepath.Dir(dir) != out {
			t.Errorf("run directory %s not in %s", dir, out)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "1.out")); err != nil || string(b) != fmt.Sprintf("run %d\n", run) {
			t.Errorf("run %d's output: %q, %v", run, b, err)
		}
	}
	// Without OutDir the output is readable until Stop, then gone.
	d := startLocal(t, Config{})
	k, _ := d.Exec(context.Background(), "echo temp")
	res, _ := d.WaitForOne(context.Background(), k)
	if b, err := res.Stdout(context.Background()); err != nil || string(b) != "temp\n" {
		t.Errorf("temporary output: %q, %v", b, err)
	}
	tmp := d.RunDir()
	d.Stop(context.Background())
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary output directory left: %v", err)
	}
	if _, err := res.Stdout(context.Background()); err == nil || !strings.Contains(err.Error(), "OutDir") {
		t.Errorf("output after Stop: %v", err)
	}
}

// TestOutputTooLarge: past MaxOutput, a clear error in both modes.
func TestOutputTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 64 MiB twice")
	}
	t.Parallel()
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			d := m.start(t, Config{Dir: t.TempDir()})
			ctx := context.Background()
			k, _ := d.Exec(ctx, fmt.Sprintf("head -c %d /dev/zero", MaxOutput+1))
			res, err := d.WaitForOne(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := res.Stdout(ctx); !errors.Is(err, ErrOutputTooLarge) {
				t.Errorf("stdout over MaxOutput: %v", err)
			}
			if b, err := res.Stderr(ctx); err != nil || len(b) != 0 {
				t.Errorf("empty stderr: %d bytes, %v", len(b), err)
			}
		})
	}
}

// TestOutputReadRefusals: output.read says clearly what it cannot serve.
func TestOutputReadRefusals(t *testing.T) {
	t.Parallel()
	c := newTestCLS(t, 1, 1)
	d := startCLSDriver(t, c, Config{Dir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, _ := d.Exec(ctx, "echo hi")
	res, err := d.WaitForOne(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	rwc, _ := c.dial(ctx)
	cl, err := client.New(ctx, rwc, protocol.RoleUser, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, tc := range []struct {
		req  protocol.OutputRead
		code string
	}{
		{protocol.OutputRead{ID: res.ID, Stream: "stdin"}, protocol.CodeBadRequest},
		{protocol.OutputRead{ID: res.ID, Stream: "stdout", Offset: -1}, protocol.CodeBadRequest},
		{protocol.OutputRead{ID: res.ID, Stream: "stdout", Attempt: 7}, protocol.CodeNotFound},
		{protocol.OutputRead{ID: 999, Stream: "stdout"}, protocol.CodeNotFound},
	} {
		if _, err := client.Do(ctx, cl, protocol.OpOutputRead, tc.req); !protocol.IsCode(err, tc.code) {
			t.Errorf("%+v: %v, want %s", tc.req, err, tc.code)
		}
	}
	// Pieces: max bytes at a time, eof at the end, past it nothing.
	got, err := client.Do(ctx, cl, protocol.OpOutputRead, protocol.OutputRead{ID: res.ID, Stream: "stdout", Max: 2})
	if err != nil || string(got.Data) != "hi" || got.EOF || got.Size != 3 || got.Attempt != 1 {
		t.Errorf("first piece: %+v, %v", got, err)
	}
	got, err = client.Do(ctx, cl, protocol.OpOutputRead, protocol.OutputRead{ID: res.ID, Stream: "stdout", Offset: 2})
	if err != nil || string(got.Data) != "\n" || !got.EOF {
		t.Errorf("last piece: %+v, %v", got, err)
	}
	// A job that never started has no output yet.
	k, _ = d.Exec(ctx, "true", Prereqs("never"))
	waitUntil(t, func() bool { return d.Pending() == 1 })
	var id int64
	waitUntil(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		id = d.records[k].id
		return id != 0
	})
	if _, err := client.Do(ctx, cl, protocol.OpOutputRead, protocol.OutputRead{ID: id, Stream: "stdout"}); !protocol.IsCode(err, protocol.CodeBadState) {
		t.Errorf("output of a waiting job: %v", err)
	}
}
