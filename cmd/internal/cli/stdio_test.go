package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestMqsubJobEnv: what mqsub's flags put in a job's environment reaches
// the placeholder with the job.
//   - env: -v and its long name --env set each variable once, values
//     with spaces and '=' kept whole (urfave/cli copies a set flag to its
//     aliases; that must add or change nothing).
//   - stdio: -o and -e travel in the environment; an array using %A
//     gives each member its place.
//   - time: --time travels in the environment, and is the job's
//     estimate unless --est gives one.
func TestMqsubJobEnv(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	dir := t.TempDir()
	ph := tb.placeholder(t, 4)
	for _, tc := range []struct {
		name string
		args []string
		want [][]string // each job's environment
		est  float64    // the job's estimate (0: not checked)
	}{
		{"env", []string{"-v", "A=1"}, [][]string{{"A=1"}}, 0},
		{"env", []string{"-v", "A=1", "-v", "B=x y=z"}, [][]string{{"A=1", "B=x y=z"}}, 0},
		{"env", []string{"--env", "A=1 B=2", "--env", "C=3"}, [][]string{{"A=1 B=2", "C=3"}}, 0},
		{"env", []string{"--env", "A=1", "--env", "A=2"}, [][]string{{"A=2"}}, 0},
		{"stdio", []string{"-o", "out-%j.log"}, [][]string{{"MQ_STDOUT=out-%j.log"}}, 0},
		{"stdio", []string{"-o", "o.log", "--error", "e.log"}, [][]string{{"MQ_STDERR=e.log", "MQ_STDOUT=o.log"}}, 0},
		{"stdio", []string{"-e", "./3600"}, [][]string{{"MQ_STDERR=./3600"}}, 0},
		{"stdio", []string{"--array", "4-5", "-o", "%A_%a.out"}, [][]string{
			{"MQ_ARRAY_INDEX=4", "MQ_ARRAY_SEQ=0", "MQ_STDOUT=%A_%a.out"},
			{"MQ_ARRAY_INDEX=5", "MQ_ARRAY_SEQ=1", "MQ_STDOUT=%A_%a.out"}}, 0},
		{"stdio", []string{"--array", "1-1", "-o", "%a.out"}, [][]string{{"MQ_ARRAY_INDEX=1", "MQ_STDOUT=%a.out"}}, 0},
		{"stdio", []string{"--array", "1-2", "-o", "r{}.out", "-e", "{}/e"}, [][]string{ // {} is the index, as in the command
			{"MQ_ARRAY_INDEX=1", "MQ_STDERR=1/e", "MQ_STDOUT=r1.out"},
			{"MQ_ARRAY_INDEX=2", "MQ_STDERR=2/e", "MQ_STDOUT=r2.out"}}, 0},
		{"time", []string{"--time", "2h"}, [][]string{{"MQ_TIME_LIMIT=7200"}}, 7200},
		{"time", []string{"--time", "1-00:00:00", "--est", "60"}, [][]string{{"MQ_TIME_LIMIT=86400"}}, 60},
		{"time", []string{"--time", "0:30"}, [][]string{{"MQ_TIME_LIMIT=30"}}, 30},
	} {
		// Sequential: each case takes its own jobs with Next.
		t.Run(tc.name+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			first := tb.submitted(t, append(append([]string{"-d", dir}, tc.args...), "t", "true")...)
			if tc.est != 0 {
				if d, err := tb.store.Inspect().Job(ctx, first); err != nil || d.Est != tc.est {
					t.Errorf("estimate %v, %v; want %v", d.Est, err, tc.est)
				}
			}
			nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: ph, Free: 4})
			if err != nil || len(nr.Jobs) != len(tc.want) || nr.Jobs[0].ID != first {
				t.Fatalf("next %+v, %v; want %d jobs from %d", nr, err, len(tc.want), first)
			}
			for i, j := range nr.Jobs {
				if !slices.Equal(j.Env, tc.want[i]) {
					t.Errorf("job %d's env %q, want %q", j.ID, j.Env, tc.want[i])
				}
			}
		})
	}
}

// TestMqsubRefused: mqsub refuses in one line, naming what to write
// instead, and adds nothing:
//   - stdio: the old meanings of -o, -e and -i, and --output;
//   - time: bad limits and sbatch's -t;
//   - files: a file named twice;
//   - env: a variable without '=';
//   - a job script given alone (sbatch job.sh);
//   - a flag after TARGET (mqsub T -p A CMD).
func TestMqsubRefused(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	dir := t.TempDir()
	ph := tb.placeholder(t, 4)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"stdio", []string{"-e", "2h"}, "-e 2h: -e is the job's stderr file now (qsub's, sbatch's); the estimate is --est 2h"},
		{"stdio", []string{"-e", "3600"}, "the estimate is --est 3600 (a file of that name: -e ./3600)"},
		{"stdio", []string{"-o", "a.dat:10M"}, "-o a.dat:10M: -o is the job's stdout file; a file the job writes is --out a.dat:10M"},
		{"stdio", []string{"-o", "a", "-o", "b"}, "-o given 2 times: -o is the job's stdout file; a file the job writes is --out PATH[:SIZE] (repeat)"},
		{"stdio", []string{"-i", "in.txt"}, "-i in.txt: a file the job reads is --in in.txt"},
		{"stdio", []string{"--output", "x"}, "--output x is ambiguous: the job's stdout file is -o x (sbatch's --output); a file the job writes is --out x"},
		{"stdio", []string{"-o", "o-%u.log"}, "stdout: \"o-%u.log\": mq expands %j (job id)"},
		{"stdio", []string{"-o", "logs/"}, "names a directory"},
		{"stdio", []string{"-o", dir}, "-o " + dir + " is a directory; give a file in it, e.g. -o " + dir + "/%x.%j.out"},
		{"stdio", []string{"-d", dir, "-e", "."}, "-e . is a directory; give a file in it, e.g. -e %x.%j.err"},
		{"files", []string{"--in", dir}, "--in: input \"" + dir + "\" is a directory: declare the files in it"},
		{"stdio", []string{"--rerun", "-o", "x", "1"}, "-o does not go with --rerun"},
		{"time", []string{"--time", "0"}, "--time 0: a time limit is more than 0"},
		{"time", []string{"--time", "-5"}, "--time: "},
		{"time", []string{"--time", "1e10"}, "--time: "},
		{"time", []string{"--time", "soon"}, "--time: "},
		{"time", []string{"-t", "1:00:00"}, "-t 1:00:00: mqsub's -t is --rerun's target; a time limit is --time 1:00:00"},
		{"array", []string{"-t", "1-10"}, "-t 1-10: mqsub's -t is --rerun's target; an array (SGE's -t) is --array 1-10, a time limit is --time 1-10"},
		{"array", []string{"-t", "1-100:2"}, "-t 1-100:2: mqsub's -t is --rerun's target; an array (SGE's -t) is --array 1-100:2 ("},
		{"time", []string{"--rerun", "--time", "1h", "1"}, "--time does not go with --rerun"},
		{"files", []string{"--in", "a", "--in", "b", "--in", "a"}, "listed twice"},
		{"files", []string{"--out", dir + ":10X"}, "--out " + dir + ":10X: no file of that name, and \"10X\" is not a size (e.g. 512, 10M, 2G)"},
		{"env", []string{"--env", "noequals"}, "not NAME=VALUE"},
	} {
		t.Run(tc.name+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			o, e, code := tb.mqsub("", append(append([]string{"-d", dir}, tc.args...), "t", "true")...)
			if code != ExitUsage || !strings.Contains(e, tc.want) || strings.Count(e, "\n") != 1 || o != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", code, o, e, tc.want)
			}
		})
	}
	// sbatch job.sbatch out of habit: the script is named, not taken for
	// a target with its command missing.
	if err := os.WriteFile(filepath.Join(dir, "job.sbatch"), []byte("#!/bin/sh\n#SBATCH -J x\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, e, code := tb.mqsub("", "-d", dir, "job.sbatch"); code != ExitUsage || !strings.Contains(e, "to run the script, mqsub NAME sh job.sbatch (its #SBATCH") || strings.Count(e, "\n") != 1 || o != "" {
		t.Errorf("mqsub job.sbatch: exit %d, stdout %q, stderr %q", code, o, e)
	}
	// A flag after TARGET (mqsub T -p A CMD) is not run as the command.
	for _, args := range [][]string{{"t", "-p", "a", "true"}, {"t", "--mem=4G", "true"}} {
		if o, e, code := tb.mqsub("", append([]string{"-d", dir}, args...)...); code != ExitUsage || !strings.Contains(e, args[1]+" after target t: mqsub's flags go before TARGET") || strings.Count(e, "\n") != 1 || o != "" {
			t.Errorf("mqsub %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, o, e)
		}
	}
	// Nor is a word after it that no command starts with: an unknown flag
	// (sbatch's --wrap), which would fail the job once it ran.
	for _, args := range [][]string{{"t", "--wrap", "echo hi"}, {"t", "-x", "true"}, {"t", "--foo=1 true"}} {
		if o, e, code := tb.mqsub("", append([]string{"-d", dir}, args...)...); code != ExitUsage || !strings.Contains(e, "COMMAND starts with "+strings.Fields(args[1])[0]+", not a command") || strings.Count(e, "\n") != 1 || o != "" {
			t.Errorf("mqsub %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, o, e)
		}
	}
	if d, err := tb.store.Next(context.Background(), protocol.Next{Placeholder: ph, Free: 4}); err != nil || len(d.Jobs) != 0 {
		t.Errorf("a refused mqsub added jobs: %+v, %v", d, err)
	}
}
