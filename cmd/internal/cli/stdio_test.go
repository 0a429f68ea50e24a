package cli

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestMqsubStdio: -o and -e reach the placeholder with the job (in its
// environment, where they travel); an array using %A gives each member
// its place; the old meanings of -o, -e and -i, and --output, are refused
// in one line naming the flag to write, and nothing is added.
func TestMqsubStdio(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	dir := t.TempDir()
	reg, err := tb.store.RegisterAs(ctx, protocol.Register{Site: "s", Host: "h", Slots: 4, OutDir: t.TempDir()}, "socket")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want [][]string // each job's environment
	}{
		{[]string{"-o", "out-%j.log"}, [][]string{{"MQ_STDOUT=out-%j.log"}}},
		{[]string{"-o", "o.log", "--error", "e.log"}, [][]string{{"MQ_STDERR=e.log", "MQ_STDOUT=o.log"}}},
		{[]string{"-e", "./3600"}, [][]string{{"MQ_STDERR=./3600"}}},
		{[]string{"--array", "4-5", "-o", "%A_%a.out"}, [][]string{
			{"MQ_ARRAY_INDEX=4", "MQ_ARRAY_SEQ=0", "MQ_STDOUT=%A_%a.out"},
			{"MQ_ARRAY_INDEX=5", "MQ_ARRAY_SEQ=1", "MQ_STDOUT=%A_%a.out"}}},
		{[]string{"--array", "1-1", "-o", "%a.out"}, [][]string{{"MQ_ARRAY_INDEX=1", "MQ_STDOUT=%a.out"}}},
	} {
		var o, e bytes.Buffer
		args := append(append([]string{"mqsub", "-d", dir}, tc.args...), "t", "true")
		if code := Run(ctx, Mqsub(tb.env(&o, &e)), args); code != 0 {
			t.Fatalf("%v: exit %d, %s", tc.args, code, e.String())
		}
		var first int64
		fmt.Sscan(o.String(), &first)
		nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 4})
		if err != nil || len(nr.Jobs) != len(tc.want) || nr.Jobs[0].ID != first {
			t.Fatalf("%v: next %+v, %v; want %d jobs from %d", tc.args, nr, err, len(tc.want), first)
		}
		for i, j := range nr.Jobs {
			if !slices.Equal(j.Env, tc.want[i]) {
				t.Errorf("%v: job %d's env %q, want %q", tc.args, j.ID, j.Env, tc.want[i])
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-e", "2h"}, "-e 2h: -e is the job's stderr file now (qsub's, sbatch's); the estimate is --est 2h"},
		{[]string{"-e", "3600"}, "the estimate is --est 3600 (a file of that name: -e ./3600)"},
		{[]string{"-o", "a.dat:10M"}, "-o a.dat:10M: -o is the job's stdout file; a file the job writes is --out a.dat:10M"},
		{[]string{"-o", "a", "-o", "b"}, "-o given 2 times: -o is the job's stdout file; a file the job writes is --out PATH[:SIZE] (repeat)"},
		{[]string{"-i", "in.txt"}, "-i in.txt: a file the job reads is --in in.txt"},
		{[]string{"--output", "x"}, "--output x is ambiguous: the job's stdout file is -o x (sbatch's --output); a file the job writes is --out x"},
		{[]string{"-o", "o-%u.log"}, "stdout: \"o-%u.log\": mq expands %j (job id)"},
		{[]string{"-o", "logs/"}, "names a directory"},
		{[]string{"--rerun", "-o", "x", "1"}, "-o does not go with --rerun"},
	} {
		var o, e bytes.Buffer
		args := append(append([]string{"mqsub", "-d", dir}, tc.args...), "t", "true")
		code := Run(ctx, Mqsub(tb.env(&o, &e)), args)
		if code != ExitUsage || !strings.Contains(e.String(), tc.want) || strings.Count(e.String(), "\n") != 1 || o.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, o.String(), e.String(), tc.want)
		}
	}
	if d, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 4}); err != nil || len(d.Jobs) != 0 {
		t.Errorf("a refused mqsub added jobs: %+v, %v", d, err)
	}
}

// TestMqsubTime: --time reaches the placeholder with the job and is its
// estimate unless --est gives one; bad limits and sbatch's -t are refused
// in one line, nothing added.
func TestMqsubTime(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	dir := t.TempDir()
	reg, err := tb.store.RegisterAs(ctx, protocol.Register{Site: "s", Host: "h", Slots: 4, OutDir: t.TempDir()}, "socket")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  []string
		est  float64
	}{
		{[]string{"--time", "2h"}, []string{"MQ_TIME_LIMIT=7200"}, 7200},
		{[]string{"--time", "1-00:00:00", "--est", "60"}, []string{"MQ_TIME_LIMIT=86400"}, 60},
		{[]string{"--time", "0:30"}, []string{"MQ_TIME_LIMIT=30"}, 30},
	} {
		var o, e bytes.Buffer
		args := append(append([]string{"mqsub", "-d", dir}, tc.args...), "t", "true")
		if code := Run(ctx, Mqsub(tb.env(&o, &e)), args); code != 0 {
			t.Fatalf("%v: exit %d, %s", tc.args, code, e.String())
		}
		var id int64
		fmt.Sscan(o.String(), &id)
		d, err := tb.store.Inspect().Job(ctx, id)
		if err != nil || d.Est != tc.est {
			t.Errorf("%v: estimate %v, %v; want %v", tc.args, d.Est, err, tc.est)
		}
		nr, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 4})
		if err != nil || len(nr.Jobs) != 1 || !slices.Equal(nr.Jobs[0].Env, tc.env) {
			t.Errorf("%v: next %+v, %v; want env %q", tc.args, nr, err, tc.env)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--time", "0"}, "--time 0: a time limit is more than 0"},
		{[]string{"--time", "-5"}, "--time: "},
		{[]string{"--time", "1e10"}, "--time: "},
		{[]string{"--time", "soon"}, "--time: "},
		{[]string{"-t", "1:00:00"}, "-t 1:00:00: mqsub's -t is --rerun's target; a time limit is --time 1:00:00"},
		{[]string{"--rerun", "--time", "1h", "1"}, "--time does not go with --rerun"},
	} {
		var o, e bytes.Buffer
		args := append(append([]string{"mqsub", "-d", dir}, tc.args...), "t", "true")
		code := Run(ctx, Mqsub(tb.env(&o, &e)), args)
		if code != ExitUsage || !strings.Contains(e.String(), tc.want) || strings.Count(e.String(), "\n") != 1 || o.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, o.String(), e.String(), tc.want)
		}
	}
	if d, err := tb.store.Next(ctx, protocol.Next{Placeholder: reg.ID, Free: 4}); err != nil || len(d.Jobs) != 0 {
		t.Errorf("a refused mqsub added jobs: %+v, %v", d, err)
	}
}
