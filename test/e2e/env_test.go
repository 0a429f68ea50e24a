//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestJobEnvironmentAndOutput: a job sees MQ_JOB_ID, MQ_ATTEMPT and
// MQ_TARGET; runs in the submitter's directory (or -d DIR, or a -f line's
// cwd); and its stdout and stderr land where mqstat -j says: in the
// placeholder's stream file under the default output (streams), in the
// files it names under --output files; mqstat --cat prints them either
// way, a rerun's own.
func TestJobEnvironmentAndOutput(t *testing.T) {
	for _, mode := range []string{"streams", "files"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testJobEnvironmentAndOutput(t, mode)
		})
	}
}

func testJobEnvironmentAndOutput(t *testing.T, mode string) {
	h := newHarness(t)
	h.startCLS("--local", "2", "--output", mode)
	streams := filepath.Join(h.home, "output", protocol.StreamDir) + "/"

	sub := filepath.Join(h.dir, "sub")
	other := filepath.Join(h.dir, "other dir") // a space in the path
	for _, d := range []string{sub, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const cmd = `echo "id=$MQ_JOB_ID attempt=$MQ_ATTEMPT target=$MQ_TARGET"; pwd -P; echo "to stderr" >&2`

	type sent struct {
		id     int64
		target string
		dir    string // where the job must run
	}
	var jobs []sent
	submitIn := func(dir, target, wantDir string, args ...string) {
		r := h.runIn(dir, nil, "mqsub", append(args, target, cmd)...)
		if r.code != 0 {
			t.Fatalf("mqsub %v: %s", args, r)
		}
		var id int64
		if _, err := fmt.Sscan(r.stdout, &id); err != nil {
			t.Fatalf("mqsub printed %q", r.stdout)
		}
		jobs = append(jobs, sent{id, target, wantDir})
	}
	submitIn(h.dir, "here", h.dir)
	submitIn(sub, "in-sub", sub)
	submitIn(h.dir, "abs-d", other, "-d", other)
	submitIn(sub, "rel-d", h.dir, "-d", "..")
	// -f: lines without cwd run in the submitter's directory.
	file := fmt.Sprintf("{\"target\":\"f-default\",\"command\":%q}\n{\"target\":\"f-cwd\",\"command\":%q,\"cwd\":%q}\n", cmd, cmd, other)
	r := h.runIn(sub, strings.NewReader(file), "mqsub", "-f", "-")
	if r.code != 0 {
		t.Fatalf("mqsub -f: %s", r)
	}
	var a, b int64
	if _, err := fmt.Sscan(r.stdout, &a, &b); err != nil {
		t.Fatalf("mqsub -f printed %q", r.stdout)
	}
	jobs = append(jobs, sent{a, "f-default", sub}, sent{b, "f-cwd", other})

	for _, j := range jobs {
		d := h.waitState(j.id, "DF", 20*time.Second)
		if d.State != "D" {
			t.Errorf("job %d (%s) ended %s: %s", j.id, j.target, d.State, d.Reason)
			continue
		}
		if d.Cwd != j.dir {
			t.Errorf("job %d (%s): mqstat says directory %q, want %q", j.id, j.target, d.Cwd, j.dir)
		}
		want := fmt.Sprintf("id=%d attempt=1 target=%s\n%s\n", j.id, j.target, j.dir)
		if mode == "files" {
			wantOut, wantErr := filepath.Join(h.home, "output", fmt.Sprint(j.id/1000), fmt.Sprintf("%d.1.out", j.id)),
				filepath.Join(h.home, "output", fmt.Sprint(j.id/1000), fmt.Sprintf("%d.1.err", j.id))
			if d.Stdout != wantOut || d.Stderr != wantErr {
				t.Errorf("job %d: output files %q, %q; want %q, %q", j.id, d.Stdout, d.Stderr, wantOut, wantErr)
			}
			if got := readFile(t, d.Stdout); got != want {
				t.Errorf("job %d stdout = %q, want %q", j.id, got, want)
			}
			if got := readFile(t, d.Stderr); got != "to stderr\n" {
				t.Errorf("job %d stderr = %q, want %q", j.id, got, "to stderr\n")
			}
		} else {
			for _, e := range []*protocol.StreamExtent{d.StdoutStream, d.StderrStream} {
				if e == nil || e.Attempt != 1 || !strings.HasPrefix(e.Path, streams) {
					t.Errorf("job %d: stdout stream %+v, stderr stream %+v; want attempt 1's, in a stream file under %s", j.id, d.StdoutStream, d.StderrStream, streams)
					break
				}
			}
		}
		if got := h.ok("mqstat", "--cat", fmt.Sprint(j.id)); got != want {
			t.Errorf("job %d: mqstat --cat printed %q, want %q", j.id, got, want)
		}
		if got := h.ok("mqstat", "--cat", fmt.Sprint(j.id), "--stderr"); got != "to stderr\n" {
			t.Errorf("job %d: mqstat --cat --stderr printed %q, want %q", j.id, got, "to stderr\n")
		}
	}
	// The plain listing names the files (the stream) too.
	text := h.ok("mqstat", "-j", fmt.Sprint(jobs[0].id))
	if mode == "files" {
		if !strings.Contains(text, filepath.Join(h.home, "output", "0", fmt.Sprintf("%d.1.out", jobs[0].id))) {
			t.Errorf("mqstat -j does not name the stdout file:\n%s", text)
		}
	} else if d := h.job(jobs[0].id); d.StdoutStream == nil || !strings.Contains(text, "in stream "+d.StdoutStream.Path) {
		t.Errorf("mqstat -j does not name the stdout stream file (%+v):\n%s", d.StdoutStream, text)
	}

	// A second attempt gets its own files and MQ_ATTEMPT=2.
	h.ok("mqsub", "--rerun", fmt.Sprint(jobs[0].id))
	d := h.waitState(jobs[0].id, "D", 20*time.Second)
	rerun := fmt.Sprintf("id=%d attempt=2 target=here\n", jobs[0].id)
	if mode == "files" {
		if !strings.HasSuffix(d.Stdout, fmt.Sprintf("%d.2.out", jobs[0].id)) {
			t.Errorf("rerun stdout file %q, want attempt 2's", d.Stdout)
		}
		if got := readFile(t, d.Stdout); !strings.HasPrefix(got, rerun) {
			t.Errorf("rerun stdout = %q", got)
		}
	} else if d.StdoutStream == nil || d.StdoutStream.Attempt != 2 {
		t.Errorf("rerun stdout stream %+v, want attempt 2's", d.StdoutStream)
	}
	if got := h.ok("mqstat", "--cat", fmt.Sprint(jobs[0].id)); !strings.HasPrefix(got, rerun) {
		t.Errorf("mqstat --cat of the rerun printed %q", got)
	}

}

// TestMissingWorkingDirectory: a job whose directory does not exist fails,
// and its reason names the directory.
func TestMissingWorkingDirectory(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	r := h.run("mqsub", "-b", "-d", filepath.Join(h.dir, "gone"), "nodir", "true")
	if r.code == 0 || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("mqsub -b of a job in a missing directory: %s; want a one-line failure", r)
	}
	if !strings.Contains(r.stderr, "gone") {
		t.Errorf("BUG: a job whose working directory does not exist fails with %q, which blames /bin/sh instead of naming the directory", strings.TrimSpace(r.stderr))
	}
}
