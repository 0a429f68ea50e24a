//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReadmeTour runs README.md's five-minute tour as written, each line
// reporting its exit status, and checks what the comments promise: the
// ids, the exit statuses, the output printed.
func TestReadmeTour(t *testing.T) {
	h := newHarness(t)
	readme := readFile(t, filepath.Join("..", "..", "README.md"))
	_, after, ok := strings.Cut(readme, "## A five-minute tour")
	if !ok {
		t.Fatal("README.md has no five-minute tour")
	}
	_, block, _ := strings.Cut(after, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var script strings.Builder
	script.WriteString("trap 'kill %1 2>/dev/null' EXIT\n")
	var cmds []string
	for _, line := range strings.Split(block, "\n") {
		cmd := strings.TrimSpace(strings.SplitN(line, " # ", 2)[0])
		if cmd == "" {
			continue
		}
		if strings.HasPrefix(cmd, "go build") {
			cmd = "export PATH=" + binDir + ":$PATH" // the binaries the suite built
		}
		cmds = append(cmds, cmd)
		script.WriteString("echo '@@ " + strings.ReplaceAll(cmd, "'", "") + "'\n" + cmd + "\necho \"@@ rc=$?\"\n")
	}
	bash := exec.Command("bash", "-c", script.String())
	env := []string{"TMPDIR=" + h.dir} // mktemp -d: a home the harness removes
	for _, kv := range h.env() {
		if !strings.HasPrefix(kv, "MQ_HOME=") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	bash.Env, bash.Dir = env, h.dir
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = bash.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		bash.Process.Kill()
		<-done
		t.Fatalf("the tour did not end in 5 minutes:\n%s", out)
	}
	if err != nil {
		t.Fatalf("the tour: %v\n%s", err, out)
	}
	// Per command: its output and exit status.
	type step struct{ cmd, out, rc string }
	var steps []step
	re := regexp.MustCompile(`(?s)@@ (.*?)\n(.*?)@@ rc=(\d+)\n`)
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		steps = append(steps, step{m[1], m[2], m[3]})
	}
	if len(steps) != len(cmds) {
		t.Fatalf("%d commands ran of %d:\n%s", len(steps), len(cmds), out)
	}
	want := map[string]struct{ out, rc string }{
		`mqsub -q gram_neg protein1BLAST "echo blast > p1.hom"`:    {"1\n", "0"},
		`mqsub -b -p protein1BLAST protein1Parse "wc -l < p1.hom"`: {"2\n", "0"},
		`mqstat --cat 2`:               {"1\n", "0"},
		`mqsub -b t3 "exit 3"`:         {"3\n", "3"},
		`mqsub --rerun 1`:              {"1\n", "0"},
		`mqsub -q slow t4 "sleep 600"`: {"4\n", "0"},
	}
	for _, s := range steps {
		w, ok := want[strings.ReplaceAll(s.cmd, "'", "")]
		switch {
		case ok && (!strings.HasPrefix(s.out, w.out) || s.rc != w.rc): // stdout first; stderr may follow
			t.Errorf("%s: printed %q, exit %s; the README says %q, exit %s", s.cmd, s.out, s.rc, w.out, w.rc)
		case !ok && s.rc != "0":
			t.Errorf("%s: exit %s:\n%s", s.cmd, s.rc, s.out)
		}
		if strings.HasPrefix(s.cmd, "mqstat --acct") && !strings.Contains(s.out, "JOBID") {
			t.Errorf("mqstat --acct:\n%s", s.out)
		}
		if strings.HasPrefix(s.cmd, "cls queue list") && !regexp.MustCompile(`gram_neg\s+2h0m0s\s+3\s+false\s+sjf`).MatchString(s.out) {
			t.Errorf("cls queue list:\n%s", s.out)
		}
	}
	if t.Failed() {
		t.Logf("the tour's output:\n%s", out)
	}
}

// TestReadmeDemo runs README.md's first command, scripts/demo.sh, as
// written (fewer proteins), and checks it ends with the summary job's
// output: every Parse found its BLAST's three hits.
func TestReadmeDemo(t *testing.T) {
	h := newHarness(t)
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "demo.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script)
	cmd.Env = append([]string{"TMPDIR=" + h.dir, "PROTEINS=4", "LOCAL=2"}, withoutVars(h.env(), "MQ_HOME", "TMPDIR")...)
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Minute): // it builds mq first
		cmd.Process.Kill()
		<-done
		t.Fatalf("scripts/demo.sh did not end in 10 minutes:\n%s", out)
	}
	if err != nil {
		t.Fatalf("scripts/demo.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "hits: 12") || !strings.Contains(string(out), "== done") {
		t.Fatalf("scripts/demo.sh did not print the summary (hits: 12 for 4 proteins):\n%s", out)
	}
}

// withoutVars is env less the variables named.
func withoutVars(env []string, names ...string) []string {
	var kept []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			kept = append(kept, kv)
		}
	}
	return kept
}

// TestReadmeTasks runs README.md's marked "by task" block as written and
// checks what its comments say: the ids, the queued members held, changed
// and released, the listing again until Ctrl-C (exit 0), mqwait's exit 1
// naming the failures (no simulate here), the rerun, the reruns not started
// deleted, and the held job submitted last.
func TestReadmeTasks(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	steps := runDocBlocks(t, h, "README.md", map[string]*regexp.Regexp{
		`mqstat --watch`: regexp.MustCompile(`every 2s\S*: mqstat --watch .*\nID .*\n1-1000\s+default\s+sim\s+A\s`),
	})
	want := []wantStep{
		{`mqsub --array 1-1000%10 sim 'simulate {}'`, 0, regexp.MustCompile(`^1\n2\n(.*\n)*1000\n$`)},
		{`mqhold -t sim -s Q`, 0, regexp.MustCompile(`(^|\n)held job 1000\n$`)},
		{`mqalter --mem 2G --time 4h -t sim -s QH`, 0, regexp.MustCompile(`(^|\n)changed job 1000\n$`)},
		{`mqrls -t sim`, 0, regexp.MustCompile(`(^|\n)released job 1000\n$`)},
		{`mqstat --watch`, 0, nil}, // interrupted, as Ctrl-C does
		{`mqwait -t sim`, 1, regexp.MustCompile(`(^|\n)1000/1000 ended: 1000 failed\b(?s:.*)mqwait: 1000 of 1000 jobs did not end done:\nmqwait:   job 1 failed \(exit 127\)`)},
		{`mqsub --rerun --all -s F`, 0, regexp.MustCompile(`^1\n2\n(.*\n)*1000\n$`)},
		{`mqdel -t sim -s QW`, 0, regexp.MustCompile(`(^|\n)deleted job 1000\n$`)},
		{`mqsub -H --priority 10 t 'cmd'`, 0, regexp.MustCompile(`^1001\n$`)},
	}
	checkSteps(t, "the README", steps, want)
	// Job 1000, queued when it was held, ran with mqalter's request, failed,
	// was rerun and deleted before it started again.
	d := h.waitState(1000, "X", 2*time.Minute)
	if d.Attempts != 1 {
		t.Errorf("job 1000 ran %d attempts, want 1 (its rerun deleted)", d.Attempts)
	}
	for _, want := range []string{`\ntime limit:\s+14400s\n`, `\nresources:\s+mem=2 GiB\n`} {
		if out := h.ok("mqstat", "-j", "1000"); !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("mqstat -j 1000: no %s:\n%s", want, out)
		}
	}
	waitFor(t, 2*time.Minute, func() error {
		if js := h.jobs("-t", "sim", "-s", "WQPEH"); len(js) > 0 {
			return fmt.Errorf("%d jobs of sim not ended, the first %d %s", len(js), js[0].ID, js[0].State)
		}
		return nil
	})
	if out := h.ok("mqstat", "-j", "1001"); !regexp.MustCompile(`\nstate:\s+H `).MatchString(out) || !regexp.MustCompile(`\npriority:\s+10\n`).MatchString(out) {
		t.Errorf("job 1001 is not held with priority 10:\n%s", out)
	}
	if t.Failed() {
		logSteps(t, steps)
	}
}
