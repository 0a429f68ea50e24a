//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// guideMarker, on the line before a guide's ```sh block, has the block run
// as written by a test of this package.
const guideMarker = "<!-- e2e: run as written -->"

// guideStep is one command of a marked block: its line, what it printed
// (stdout and stderr) and its exit status.
type guideStep struct {
	cmd, out string
	rc       int
}

// runGuideBlocks runs the commands of every block of the guide page that
// guideMarker marks, one shell each, in order, in the harness's job
// directory with the binaries of this suite first on PATH; a comment
// (" # ") ends a command. It fails the test if a page has no marked block.
func runGuideBlocks(t *testing.T, h *harness, page string) []guideStep {
	t.Helper()
	text := readFile(t, filepath.Join("..", "..", "docs", "guide", page))
	var cmds []string
	for _, part := range strings.Split(text, guideMarker+"\n")[1:] {
		block, ok := strings.CutPrefix(part, "```sh\n")
		if !ok {
			t.Fatalf("%s: %s is not followed by a ```sh block", page, guideMarker)
		}
		block, _, _ = strings.Cut(block, "```")
		for _, line := range strings.Split(block, "\n") {
			if cmd := strings.TrimSpace(strings.SplitN(line, " # ", 2)[0]); cmd != "" {
				cmds = append(cmds, cmd)
			}
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("%s has no block marked %s", page, guideMarker)
	}
	env := append(h.env(), "PATH="+binDir+":"+getenv(h.env(), "PATH"))
	var steps []guideStep
	for _, cmd := range cmds {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		c := exec.CommandContext(ctx, "bash", "-c", cmd)
		c.Env, c.Dir = env, h.dir
		out, err := c.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		rc := 0
		if err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || timedOut {
				t.Fatalf("%s: %v\n%s", cmd, err, out)
			}
			rc = ee.ExitCode()
		}
		steps = append(steps, guideStep{cmd, string(out), rc})
	}
	return steps
}

// getenv is NAME's value in env.
func getenv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if n, val, ok := strings.Cut(kv, "="); ok && n == name {
			v = val
		}
	}
	return v
}

// TestGuideSubmitting runs the marked blocks of docs/guide/submitting.md
// (after-any cleanup jobs, hold and priority, mqalter) as written and
// checks what the page says of them: the ids printed, every command's exit
// status 0, a cleanup job that runs after a failure, a -p dependent
// blocked by it, a held job and a job waiting for it, and held jobs
// changed by mqalter, still held.
func TestGuideSubmitting(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	steps := runGuideBlocks(t, h, "submitting.md")
	ids := map[string]string{ // the id each submit prints first
		`mqsub work 'exit 1'`:                                           "1",
		`mqsub --after-any work tidy 'rm -rf scratch'`:                  "2",
		`mqsub -p work report 'make report'`:                            "3",
		`mqsub --after-any a,b --after-any c t CMD`:                     "4",
		`mqsub -H A 'make data'`:                                        "5",
		`mqsub -p A B 'make report'`:                                    "6",
		`mqsub --priority 100 T CMD`:                                    "7",
		`mqsub -H --array 1-100 --mem 4G align 'bwa mem ref.fa r{}.fq'`: "8",
	}
	for _, s := range steps {
		if s.rc != 0 {
			t.Errorf("%s: exit %d:\n%s", s.cmd, s.rc, s.out)
		}
		if id, ok := ids[s.cmd]; ok {
			if first, _, _ := strings.Cut(s.out, "\n"); first != id {
				t.Errorf("%s printed %q, want the id %s first", s.cmd, s.out, id)
			}
			delete(ids, s.cmd)
		}
		if s.cmd == "mqstat -s H" && !strings.Contains(s.out, "\n5 ") {
			t.Errorf("mqstat -s H does not list the held job 5:\n%s", s.out)
		}
		if s.cmd == "mqstat -j 9" {
			for _, want := range []string{`priority:\s+50\n`, `estimate:\s+7200s\n`, `time limit:\s+14400s\n`, `resources:\s+mem=8 GiB\n`, `state:\s+H `} {
				if !regexp.MustCompile(want).MatchString(s.out) {
					t.Errorf("mqstat -j 9 after mqalter: no %s:\n%s", want, s.out)
				}
			}
		}
	}
	for cmd := range ids {
		t.Errorf("the page no longer runs %s", cmd)
	}
	for _, w := range []struct {
		id    int64
		state string
	}{
		{1, "F"}, // work fails
		{2, "D"}, // tidy runs once work has ended, however
		{3, "B"}, // report is blocked: work failed
		{4, "W"}, // a, b and c have no jobs yet
		{5, "H"}, // held until mqrls
		{6, "W"}, // B waits for A, held
		{8, "H"}, // mqalter keeps a held job held
	} {
		h.waitState(w.id, w.state, 2*time.Minute)
	}
	if t.Failed() {
		for _, s := range steps {
			t.Logf("$ %s (exit %d)\n%s", s.cmd, s.rc, s.out)
		}
	}
}

// TestGuideData runs the marked block of docs/guide/data.md (a bag of
// tasks in a Storage Affinity queue) as written: every command exits 0,
// and the job whose command fails, copied by the idle placeholder, fails
// after a few attempts (it ran hundreds when each failed copy was
// followed by a new one), as does the job that opted out of copies,
// once.
func TestGuideData(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	steps := runGuideBlocks(t, h, "data.md")
	for _, s := range steps {
		if s.rc != 0 {
			t.Errorf("%s: exit %d:\n%s", s.cmd, s.rc, s.out)
		}
	}
	if d := h.waitState(1, "F", 2*time.Minute); d.Attempts > 3 {
		t.Errorf("job 1, whose command fails, ran %d attempts", d.Attempts)
	}
	if d := h.waitState(2, "F", 2*time.Minute); d.Attempts != 1 {
		t.Errorf("job 2, never copied, ran %d attempts", d.Attempts)
	}
	if t.Failed() {
		for _, s := range steps {
			t.Logf("$ %s (exit %d)\n%s", s.cmd, s.rc, s.out)
		}
	}
}

// TestGuideArrays runs the marked block of docs/guide/arrays.md as
// written: the ids each array prints, the array lines of mqstat, the
// members of one array, and every selector's exit status 0 (the sweep's
// -b and mqwait report the jobs' failures: no blastpgp or run here), and
// the mended job running its new command.
func TestGuideArrays(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	steps := runGuideBlocks(t, h, "arrays.md")
	ids := map[string][2]string{ // first and last id printed
		`mqsub --array 1-1000 blast "blastpgp -i seq{}.fa -o hom{}.txt"`: {"1", "1000"},
		`mqsub --array 0-99:10 -b sweep 'run --param $MQ_ARRAY_INDEX'`:   {"1001", "1010"},
		`mqsub -q gram_neg --array 1-1000%10 sim 'simulate {}'`:          {"1011", "2010"},
	}
	mayFail := map[string]bool{ // exit 1: the jobs they wait for failed
		`mqsub --array 0-99:10 -b sweep 'run --param $MQ_ARRAY_INDEX'`: true,
		`mqwait 1-1000 --timeout 2h`:                                   true,
	}
	for _, s := range steps {
		if s.rc != 0 && !(mayFail[s.cmd] && s.rc == 1) {
			t.Errorf("%s: exit %d:\n%s", s.cmd, s.rc, s.out)
		}
		if w, ok := ids[s.cmd]; ok {
			lines := strings.Split(strings.TrimSpace(s.out), "\n")
			if lines[0] != w[0] || !slices.Contains(lines, w[1]) {
				t.Errorf("%s printed %q..., want the ids %s to %s", s.cmd, clip(s.out), w[0], w[1])
			}
		}
		switch s.cmd {
		case "mqstat":
			if !regexp.MustCompile(`\n1-1000\s+default\s+blast\s+A `).MatchString(s.out) {
				t.Errorf("mqstat shows no line for the array 1-1000:\n%s", s.out)
			}
		case "mqstat --array 120":
			if !strings.Contains(s.out, "\n120 ") || !strings.Contains(s.out, "\n1000 ") {
				t.Errorf("mqstat --array 120 does not list the members 1-1000:\n%s", clip(s.out))
			}
		}
	}
	if d := h.job(123); !strings.HasPrefix(d.Command, "blastp -query p3.fa") {
		t.Errorf("job 123 after --rerun --command runs %q", d.Command)
	}
	if t.Failed() {
		for _, s := range steps {
			t.Logf("$ %s (exit %d)\n%s", s.cmd, s.rc, clip(s.out))
		}
	}
}
