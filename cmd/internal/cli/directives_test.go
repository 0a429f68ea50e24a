package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A job script's #MQ lines are mqsub's flags, under the command line's.
func TestMqsubDirectives(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write("job.sh", "#!/bin/sh\n# align one sample\n#MQ --time 4:00:00 -c 2 --mem=1G\n\n#MQ -q long --priority 5\nbwa mem ref.fa x.fq\n#MQ -c 8\n")
	write("sbatch.sh", "#!/bin/bash\n#SBATCH --time=1:00:00\n#SBATCH -c 4\nsrun x\n")
	write("plain.sh", "#!/bin/sh\necho hi\n")
	if err := os.Mkdir(filepath.Join(dir, "my project"), 0o700); err != nil {
		t.Fatal(err)
	}
	write("my project/job.sh", "#!/bin/sh\n#MQ -q spaced -c 3\necho hi\n")
	write("bom.sh", "\ufeff#!/bin/sh\n#MQ -q marked -c 5\necho hi\n")
	for _, tc := range []struct {
		name      string
		args      []string
		cpus      int
		mem       int64
		limit     float64
		queue     string
		prio      int
		warning   string // in stderr; "" = none
		noWarning bool
	}{
		{"sh job.sh", []string{"t", "sh", "job.sh"}, 2, 1 << 30, 4 * 3600, "long", 5, "", true},
		{"the script itself", []string{"t", "./job.sh"}, 2, 1 << 30, 4 * 3600, "long", 5, "", true},
		{"one word", []string{"t", "bash job.sh sample1"}, 2, 1 << 30, 4 * 3600, "long", 5, "", true},
		{"the command line's win", []string{"-c", "4", "-q", "short", "t", "sh", "job.sh"}, 4, 1 << 30, 4 * 3600, "short", 5, "", true},
		{"sbatch lines warned of", []string{"t", "sh", "sbatch.sh"}, 0, 0, 0, "default", 0, "sbatch.sh's #SBATCH lines are not read: write them as #MQ lines", false},
		{"no directives", []string{"t", "sh", "plain.sh"}, 0, 0, 0, "default", 0, "", true},
		{"not a script", []string{"t", "sh", "-c", "./job.sh"}, 0, 0, 0, "default", 0, "", true},
		{"quoted", []string{"t", `sh "job.sh"`}, 2, 1 << 30, 4 * 3600, "long", 5, "", true},
		{"a space in its path", []string{"t", `sh 'my project/job.sh'`}, 3, 0, 0, "spaced", 0, "", true},
		{"a space escaped", []string{"t", `./my\ project/job.sh`}, 3, 0, 0, "spaced", 0, "", true},
		{"a byte order mark", []string{"t", "./bom.sh"}, 5, 0, 0, "marked", 0, "bom.sh begins with a UTF-8 byte order mark", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, e, code := tb.mqsub("", append([]string{"-d", dir}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, e)
			}
			if tc.warning != "" && !strings.Contains(e, tc.warning) || tc.noWarning && e != "" {
				t.Errorf("stderr %q, want %q", e, tc.warning)
			}
			var id int64
			if _, err := fmt.Sscan(o, &id); err != nil {
				t.Fatalf("stdout %q", o)
			}
			d, err := tb.store.Inspect().Job(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if d.CPUs != tc.cpus || d.Mem != tc.mem || d.TimeLimit != tc.limit || d.Queue != tc.queue || d.Priority != tc.prio {
				t.Errorf("cpus %d mem %d time %g queue %s priority %d, want %d %d %g %s %d",
					d.CPUs, d.Mem, d.TimeLimit, d.Queue, d.Priority, tc.cpus, tc.mem, tc.limit, tc.queue, tc.prio)
			}
		})
	}
}

// A bad #MQ line is a usage error naming the script and line, and adds
// nothing.
func TestMqsubDirectiveErrors(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	dir := t.TempDir()
	for _, tc := range []struct{ line, want string }{
		{"#MQ --tiem 4h", "bad.sh:2: #MQ --tiem: mqsub has no such flag"},
		{"#MQ -f jobs.jsonl", "bad.sh:2: #MQ -f: goes on mqsub's command line, not in a script"},
		{"#MQ --rerun", "goes on mqsub's command line"},
		{"#MQ align", "bad.sh:2: #MQ align: not a flag"},
		{"#MQ -c 2 --time", "bad.sh:2: #MQ --time: needs a value"},
		{"#MQ -v 'A=1", "bad.sh: line 2: #MQ:"},
		{"#MQ -N align", "qsub"}, // a habit's hint, as on the command line
	} {
		t.Run(tc.line, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, "bad.sh"), []byte("#!/bin/sh\n"+tc.line+"\ntrue\n"), 0o700); err != nil {
				t.Fatal(err)
			}
			before := tb.jobs()
			_, e, code := tb.mqsub("", "-d", dir, "t", "sh", "bad.sh")
			if code != ExitUsage || !strings.Contains(e, tc.want) || strings.Count(strings.TrimSpace(e), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want exit %d and one line with %q", code, e, ExitUsage, tc.want)
			}
			if tb.jobs() != before {
				t.Error("a job was added")
			}
		})
	}
}

// A script that is a FIFO (someone's named pipe where the script should
// be) is not read: mqsub does not wait for a writer, and submits.
func TestMqsubDirectivesFIFO(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "job.sh"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan string, 1)
	go func() {
		o, e, code := tb.mqsub("", "-d", dir, "t", "sh", "job.sh")
		done <- fmt.Sprintf("exit %d, stdout %q, stderr %q", code, o, e)
	}()
	select {
	case got := <-done:
		if !strings.HasPrefix(got, "exit 0,") {
			t.Errorf("mqsub of a FIFO script: %s, want submitted", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("mqsub waits on the FIFO")
	}
}

// A script the job's shell would not run, as sbatch job.sh runs any, is
// warned of and submitted: named without a '/' and not on PATH (exit
// 127), or not executable (exit 126). Run through a shell it is neither.
func TestMqsubScriptNotRunnable(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"job.sh": 0o700, "noexec.sh": 0o600} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\necho hi\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string // "": no warning
	}{
		{[]string{"job.sh"}, "mqsub: warning: job.sh is a file in the job's directory, but the job's shell looks for a command without a '/' on PATH, and PATH has no job.sh: write ./job.sh (or sh job.sh)\n"},
		{[]string{"job.sh arg"}, "PATH has no job.sh: write ./job.sh"},
		{[]string{"./noexec.sh"}, "mqsub: warning: ./noexec.sh is not executable, so the job would fail (exit 126): chmod +x ./noexec.sh, or run it with sh ./noexec.sh\n"},
		{[]string{"./job.sh"}, ""},
		{[]string{"sh", "noexec.sh"}, ""},
		{[]string{"ls"}, ""}, // on PATH, no file here
	} {
		var o, e bytes.Buffer
		env := tb.env(&o, &e)
		env.Environ = func() []string { return []string{"PATH=/usr/bin:/bin"} }
		code := Run(context.Background(), Mqsub(env), append([]string{"mqsub", "-H", "-d", dir, "t"}, tc.args...))
		if code != 0 || tc.want == "" && e.String() != "" || !strings.Contains(e.String(), tc.want) {
			t.Errorf("mqsub t %q: exit %d, stderr %q; want exit 0 and %q", tc.args, code, e.String(), tc.want)
		}
	}
}
