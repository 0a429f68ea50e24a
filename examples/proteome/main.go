// Command proteome is a PA-style driver program (thesis 004, chapter 5): a
// synthetic proteome where each protein has a BLAST-like job and then a
// Parse-like job that reads the BLAST job's output file. Runtimes and file
// sizes are drawn per thesis table 6.1 (BLAST 2-8 s, homologue file
// 5,000-85,000 B, Parse 0.5-0.7 s, all following the sequence size drawn
// uniformly from 250-850 B) and scaled by --scale. Jobs sleep, so the
// machine's cores are not what limits them.
//
// Without --bench it runs the workflow once through the driver: on the CLS
// of $MQ_HOME if one answers there, else locally. With --bench it runs every
// configuration of --placeholders x --batching on a CLS of its own (a
// temporary MQ_HOME, `cls serve --local N`) and prints tables shaped like
// the thesis's tables 5.2-5.6, or with --json one object per run and phase:
//
//	go run ./examples/proteome --bench --json --placeholders 16 --batching none --proteins 1000 --scale 0.01
//
// --batching values: none, hetero (one pipeline per protein), or a
// homogeneous batching factor (2, 4, ...). Every flag takes a comma list.
// Speed-up is the sum of the jobs' own runtimes (as their placeholders
// measured them) over the phase's makespan.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "proteome:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

type options struct {
	bench        bool
	json         bool
	placeholders []int
	batchings    []string
	proteins     []int
	scales       []float64
	seed         int64
	sync         string
	cls          string
	clsFlags     []string
	consumers    int
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("proteome", flag.ContinueOnError)
	var o options
	var ph, bt, pr, sc string
	fs.BoolVar(&o.bench, "bench", false, "run every configuration on a CLS of its own and print the tables")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per run and phase instead of tables")
	fs.StringVar(&ph, "placeholders", "2,4,8,16", "local placeholders (comma list; --bench)")
	fs.StringVar(&bt, "batching", "none,hetero,2,4,8,16,32,64", "none, hetero, or a homogeneous batching factor (comma list)")
	fs.StringVar(&pr, "proteins", "1000", "proteins in the synthetic proteome (comma list)")
	fs.StringVar(&sc, "scale", "0.01", "time factor applied to the thesis's runtimes (comma list)")
	fs.Int64Var(&o.seed, "seed", 1, "seed of the synthetic proteome")
	fs.StringVar(&o.sync, "sync", "full", "commit durability of the benchmark's CLS: full or normal (--bench)")
	fs.StringVar(&o.cls, "cls", "", "cls binary to use (--bench; default: build it)")
	fs.IntVar(&o.consumers, "consumers", 8, "driver consumers (2..512)")
	clsFlags := fs.String("cls-flags", "", "more flags for `cls serve`, space-separated (--bench; e.g. \"--cpuprofile /tmp/cls.prof\")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err}
	}
	o.clsFlags = strings.Fields(*clsFlags)
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	var err error
	if o.placeholders, err = ints("--placeholders", ph, 1, 4096); err != nil {
		return err
	}
	if o.proteins, err = ints("--proteins", pr, 1, 1000000); err != nil {
		return err
	}
	for _, s := range strings.Split(sc, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || f <= 0 || f > 10 {
			return usageError{fmt.Errorf("--scale: %q is not a number in (0, 10]", s)}
		}
		o.scales = append(o.scales, f)
	}
	for _, s := range strings.Split(bt, ",") {
		s = strings.TrimSpace(s)
		if s != "none" && s != "hetero" {
			if n, err := strconv.Atoi(s); err != nil || n < 1 || n > 10000 {
				return usageError{fmt.Errorf("--batching: %q is not none, hetero or a batching factor 1..10000", s)}
			}
		}
		o.batchings = append(o.batchings, s)
	}
	if o.sync != "full" && o.sync != "normal" {
		return usageError{fmt.Errorf("--sync must be full or normal, not %q", o.sync)}
	}
	if o.bench {
		return bench(ctx, o)
	}
	return once(ctx, o)
}

func ints(flagName, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, usageError{fmt.Errorf("%s: %q is not a number %d..%d", flagName, f, lo, hi)}
		}
		out = append(out, n)
	}
	return out, nil
}
