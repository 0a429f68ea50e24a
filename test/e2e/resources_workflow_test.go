//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mqsubShim makes a directory with an mqsub that appends its arguments,
// one line per call (each argument in brackets), to log, then runs the
// real mqsub: put it first on PATH to see what a wrapper asks for.
func mqsubShim(t *testing.T, log string) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\n{ for a; do printf '[%s] ' \"$a\"; done; echo; } >>'" + log + "'\nexec '" + filepath.Join(binDir, "mqsub") + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "mqsub"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWorkflowWrappersResources: the Snakemake profile's mq-submit turns
// a rule's {threads} and {resources.mem_mb} into mqsub -c and --mem, and
// mq-makeflow-submit Makeflow's CORES, MEMORY and GPUS into -c, --mem and
// --gpus; one core and no memory ask for nothing.
func TestWorkflowWrappersResources(t *testing.T) {
	root := repoRoot(t)
	h := newHarness(t)
	h.startCLS("--local", "1")
	log := filepath.Join(h.dir, "mqsub.log")
	shim := mqsubShim(t, log)
	smk := filepath.Join(root, "examples", "snakemake", "profile", "mq-submit")
	mf := filepath.Join(root, "scripts", "mq-makeflow-submit")
	js := filepath.Join(h.dir, "snakejob.x.1.sh")
	os.WriteFile(js, []byte("true\n"), 0o644)
	for _, c := range []struct {
		name string
		argv []string
		env  []string
		want []string // in the mqsub call
		not  []string // not in it
	}{
		{"snakemake threads and mem", []string{smk, "-c", "4", "-m", "300", js}, nil, []string{"[-c] [4] [--mem] [300M]"}, nil},
		{"snakemake defaults", []string{smk, "-c", "1", "-m", "0", js}, nil, nil, []string{"[-c]", "[--mem]"}},
		{"snakemake threads only", []string{smk, "-q", "q1", "-c", "2", "-m", "0", js}, nil, []string{"[-q] [q1] [-c] [2]"}, []string{"[--mem]"}},
		// Snakemake's runtime is in minutes; --est takes seconds.
		{"snakemake runtime", []string{smk, "-c", "1", "-m", "0", "-t", "5", js}, nil, []string{"[--est] [300]"}, []string{"[-c]", "[--mem]"}},
		{"snakemake no runtime", []string{smk, "-c", "1", "-m", "0", "-t", "0", js}, nil, nil, []string{"[--est]"}},
		{"makeflow cores memory gpus", []string{mf, "-N", "r1", "./mq.wrapper"}, []string{"BATCH_JOB_COMMAND=true", "CORES=2", "MEMORY=500", "GPUS=1"},
			[]string{"[-c] [2] [--mem] [500M] [--gpus] [1]"}, nil},
		{"makeflow empty", []string{mf, "-N", "r2", "./mq.wrapper"}, []string{"BATCH_JOB_COMMAND=true", "CORES=1", "MEMORY=", "GPUS="},
			nil, []string{"[-c]", "[--mem]", "[--gpus]"}},
		{"makeflow unset", []string{mf, "-N", "r3", "./mq.wrapper"}, []string{"BATCH_JOB_COMMAND=true"}, nil, []string{"[-c]", "[--mem]", "[--gpus]"}},
	} {
		os.Remove(log)
		cmd := exec.Command(c.argv[0], c.argv[1:]...)
		env := []string{"PATH=" + shim + string(os.PathListSeparator) + binDir + string(os.PathListSeparator) + os.Getenv("PATH")}
		for _, kv := range h.env() {
			if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "CORES=") && !strings.HasPrefix(kv, "MEMORY=") && !strings.HasPrefix(kv, "GPUS=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, c.env...)
		cmd.Dir = h.dir
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Errorf("%s: %v: %s", c.name, err, errb.String())
			continue
		}
		call := readFile(t, log)
		for _, w := range c.want {
			if !strings.Contains(call, w) {
				t.Errorf("%s: mqsub %s, want %s", c.name, call, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(call, n) {
				t.Errorf("%s: mqsub %s, want no %s", c.name, call, n)
			}
		}
	}
}

// TestSnakemakeProfileResources runs the real Snakemake 7 through the
// profile: a rule with threads: 2, mem_mb=300 and runtime=2 asks mq for 2
// cores and 300 MiB with an estimate of 120 s, one that declares none asks
// for nothing (the profile's default mem_mb of 0, not Snakemake's 1000, and
// runtime of 0).
func TestSnakemakeProfileResources(t *testing.T) {
	needTool(t, "snakemake", "snakemake")
	root := repoRoot(t)
	h := newHarness(t)
	// Placeholders of 2 cores: the CLS packs, so a threads: 2 rule waits
	// for one that holds it.
	h.startCLS("--local", "2", "--slots", "2")
	dir := filepath.Join(h.dir, "smk")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "Snakefile"), []byte(`rule all:
    input: "big.txt", "small.txt"
localrules: all
rule big:
    output: "big.txt"
    threads: 2
    resources: mem_mb=300, runtime=2
    shell: "echo big > {output}"
rule small:
    output: "small.txt"
    shell: "echo small > {output}"
`), 0o644)
	log := filepath.Join(h.dir, "mqsub.log")
	shim := mqsubShim(t, log)
	runSnakemakeProfile(t, h, root, dir, append([]string{"PATH=" + shim + string(os.PathListSeparator) + binDir + string(os.PathListSeparator) + os.Getenv("PATH")}, h.wfEnv()[1:]...))
	calls := strings.Split(strings.TrimSpace(readFile(t, log)), "\n")
	if len(calls) != 2 {
		t.Fatalf("%d mqsub calls:\n%s", len(calls), strings.Join(calls, "\n"))
	}
	for _, call := range calls {
		switch {
		case strings.Contains(call, ".big."):
			if !strings.Contains(call, "[--est] [120] [-c] [2] [--mem] [300M]") {
				t.Errorf("rule big: mqsub %s", call)
			}
		case strings.Contains(call, ".small."):
			if strings.Contains(call, "[-c]") || strings.Contains(call, "[--mem]") || strings.Contains(call, "[--est]") {
				t.Errorf("rule small: mqsub %s", call)
			}
		default:
			t.Errorf("an mqsub call of no rule: %s", call)
		}
	}
}

// TestSnakemakeThreadsPacked: two rules of threads: 2 on the CLS's one
// placeholder of 2 cores never run at once, as their own start and end
// stamps show; a snakemake run without mq would not know.
func TestSnakemakeThreadsPacked(t *testing.T) {
	needTool(t, "snakemake", "snakemake")
	root := repoRoot(t)
	h := newHarness(t)
	h.startCLS("--local", "1", "--slots", "2")
	dir := filepath.Join(h.dir, "smk")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "Snakefile"), []byte(`rule all:
    input: "a.txt", "b.txt"
localrules: all
rule two:
    output: "{x}.txt"
    threads: 2
    shell: "date +%s%N > {wildcards.x}.start; sleep 2; date +%s%N > {wildcards.x}.end; echo {wildcards.x} > {output}"
`), 0o644)
	runSnakemakeProfile(t, h, root, dir, h.wfEnv())
	stamp := func(name string) int64 {
		n, err := strconv.ParseInt(strings.TrimSpace(readFile(t, filepath.Join(dir, name))), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if stamp("a.start") < stamp("b.end") && stamp("b.start") < stamp("a.end") {
		t.Errorf("the two 2-thread rules overlapped on a 2-core placeholder: a %d-%d, b %d-%d",
			stamp("a.start"), stamp("a.end"), stamp("b.start"), stamp("b.end"))
	}
}

// runSnakemakeProfile runs the real Snakemake on dir's Snakefile through
// the repository's mq profile, with env, and fails t unless it succeeds
// within 10 minutes.
func runSnakemakeProfile(t *testing.T, h *harness, root, dir string, env []string) {
	t.Helper()
	cmd := exec.Command("snakemake", "--profile", filepath.Join(root, "examples", "snakemake", "profile"), "--directory", dir, "-s", filepath.Join(dir, "Snakefile"))
	cmd.Env = env
	cmd.Dir = h.dir
	var errb bytes.Buffer
	cmd.Stderr = &errb
	done := make(chan error, 1)
	go func() { done <- cmd.Run() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("snakemake: %v\n%s", err, tail(errb.String()))
		}
	case <-time.After(10 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("snakemake: no end after 10 minutes\n%s", tail(errb.String()))
	}
}
