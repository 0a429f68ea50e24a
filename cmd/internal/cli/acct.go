package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Accounting (mqstat --acct), after Slurm's sacct: a line per attempt
// (the job's latest as ID, earlier ones as ID.N beneath it) with its host,
// start, elapsed time, CPU and max RSS, then a summary per target.

// acctHeader is the table's first line.
const acctHeader = "JOBID\tTARGET\tQUEUE\tS\tHOST\tSTART\tELAPSED\tUSER\tSYS\tMAXRSS\tEXIT\tCOST"

// acctSums adds up a listing's jobs per target.
type acctSums struct {
	order   []string
	targets map[string]*targetSum
}

type targetSum struct {
	jobs, ended int
	cpu         float64 // every attempt's user + system seconds
	cost        float64 // every attempt's charge
	costed      bool
	elapsed     float64 // sum over ended jobs' last attempts
	maxElapsed  float64
}

func (s *acctSums) add(j protocol.JobInfo) {
	if s.targets == nil {
		s.targets = map[string]*targetSum{}
	}
	t := s.targets[j.Target]
	if t == nil {
		t = &targetSum{}
		s.targets[j.Target] = t
		s.order = append(s.order, j.Target)
	}
	t.jobs++
	t.cpu += j.CPUUser + j.CPUSys
	t.addCost(j.Cost)
	for _, a := range j.Earlier {
		t.cpu += a.CPUUser + a.CPUSys
		t.addCost(a.Cost)
	}
	if j.Finished != "" {
		t.ended++
		t.elapsed += j.Elapsed
		t.maxElapsed = max(t.maxElapsed, j.Elapsed)
	}
}

func (t *targetSum) addCost(c *float64) {
	if c != nil {
		t.cost += *c
		t.costed = true
	}
}

// Cost shows a charge (site price x hours) or "-" when not costed.
func Cost(c *float64) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%.4g", *c)
}

// print writes the per-target summary, targets by name.
func (s *acctSums) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tJOBS\tENDED\tCPU\tMEAN ELAPSED\tMAX ELAPSED\tCOST")
	names := append([]string(nil), s.order...)
	sort.Strings(names)
	for _, name := range names {
		t := s.targets[name]
		mean := "-"
		maxE := "-"
		if t.ended > 0 {
			mean, maxE = Seconds(t.elapsed/float64(t.ended)), Seconds(t.maxElapsed)
		}
		cost := "-"
		if t.costed {
			cost = Cost(&t.cost)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", protocol.Printable(name), t.jobs, t.ended, Seconds(t.cpu), mean, maxE, cost)
	}
	tw.Flush()
}

// printAcct writes a job's lines: its latest attempt, then earlier ones.
func printAcct(tw io.Writer, j protocol.JobInfo, now time.Time) {
	row := func(id string, host, started, finished string, exit *int, a protocol.Accounting) {
		if host == "" {
			host = "-"
		}
		elapsed, user, sys, rss := "-", "-", "-", "-"
		if finished != "" {
			elapsed = Seconds(a.Elapsed)
		}
		if a.Measured() {
			user, sys, rss = Seconds(a.CPUUser), Seconds(a.CPUSys), HumanBytes(a.MaxRSS)
		}
		ex := "-"
		if exit != nil {
			ex = fmt.Sprint(*exit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, protocol.Printable(j.Target), protocol.Printable(j.Queue),
			protocol.Printable(j.State), protocol.Printable(host), shortTime(started, now), elapsed, user, sys, rss, ex, Cost(a.Cost))
	}
	row(fmt.Sprint(j.ID), j.Host, j.Started, j.Finished, j.Exit, j.Accounting)
	for _, a := range j.Earlier {
		row(fmt.Sprintf("%d.%d", j.ID, a.Attempt), a.Host, a.Started, a.Finished, a.Exit, a.Accounting)
	}
}

// Seconds shows a duration in seconds the way sacct does: [D-]HH:MM:SS,
// with milliseconds below a minute.
func Seconds(s float64) string {
	if s < 60 {
		return fmt.Sprintf("%.3fs", s)
	}
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	out := fmt.Sprintf("%02d:%02d:%02d", d/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second)
	if days > 0 {
		out = fmt.Sprintf("%d-%s", days, out)
	}
	return out
}

// usageLine is an attempt's accounting for mqstat -j.
func usageLine(a protocol.Accounting, ended bool) string {
	var parts []string
	if ended {
		parts = append(parts, "elapsed "+Seconds(a.Elapsed))
	}
	if a.Measured() {
		parts = append(parts, "user "+Seconds(a.CPUUser), "system "+Seconds(a.CPUSys), "max RSS "+HumanBytes(a.MaxRSS))
	}
	return strings.Join(parts, ", ")
}
