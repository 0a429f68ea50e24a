// Package acct prints accounting (mqstat --acct), after Slurm's sacct: a
// line per attempt (the job's latest as ID, earlier ones as ID.N beneath
// it) with its host, start, elapsed time, CPU and max RSS, then a summary
// per target; and the figures listings show: times, durations, sizes,
// costs.
package acct

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Header is the table's first line.
const Header = "JOBID\tTARGET\tQUEUE\tS\tHOST\tSTART\tELAPSED\tUSER\tSYS\tMAXRSS\tEXIT\tCOST"

// Sums adds up a listing's jobs per target.
type Sums struct {
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

func (s *Sums) Add(j protocol.JobInfo) {
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
func (s *Sums) Print(w io.Writer) {
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

// Line writes a job's lines: its latest attempt, then earlier ones.
func Line(tw io.Writer, j protocol.JobInfo, now time.Time) {
	row := func(id, state, host, started, finished string, exit *int, a protocol.Accounting) {
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
			protocol.Printable(state), protocol.Printable(host), ShortTime(started, now), elapsed, user, sys, rss, ex, Cost(a.Cost))
	}
	row(fmt.Sprint(j.ID), j.State, j.Host, j.Started, j.Finished, j.Exit, j.Accounting)
	for _, a := range j.Earlier {
		row(fmt.Sprintf("%d.%d", j.ID, a.Attempt), attemptState(a), a.Host, a.Started, a.Finished, a.Exit, a.Accounting)
	}
}

// attemptState is how an earlier attempt ended, as sacct gives each
// step its own state: D (exit 0 before a rerun), X (deleted, then
// rerun), F (another exit status), - (no status: its placeholder was
// lost or stopped).
func attemptState(a protocol.AttemptInfo) string {
	switch {
	case strings.HasPrefix(a.Reason, "deleted"):
		return "X"
	case a.Exit == nil:
		return "-"
	case *a.Exit == 0:
		return "D"
	}
	return "F"
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

// UsageLine is an attempt's accounting for mqstat -j.
func UsageLine(a protocol.Accounting, ended bool) string {
	var parts []string
	if ended {
		parts = append(parts, "elapsed "+Seconds(a.Elapsed))
	}
	if a.Measured() {
		parts = append(parts, "user "+Seconds(a.CPUUser), "system "+Seconds(a.CPUSys), "max RSS "+HumanBytes(a.MaxRSS))
	}
	return strings.Join(parts, ", ")
}

// Use compares what each category's jobs (queue and target, the
// category --cpus auto and --mem auto learn from) asked for with what
// their attempts used: the cores left idle and the memory asked but never
// touched are what a smaller request would give back to other jobs.
type Use struct {
	asked bool // some job of the listing asked for resources
	order []useKey
	by    map[useKey]*catUse
}

type useKey struct{ queue, target string }

type catUse struct {
	runs                 int     // attempts that ran to an end and were measured
	cpu, elapsed, coreS  float64 // their CPU seconds, wall seconds, cores asked x wall seconds
	minCPUs, maxCPUs     int
	cpusAuto, memAuto    bool
	minMem, maxMem, peak int64 // memory asked (bytes), the largest max RSS
}

func (s *Use) Add(j protocol.JobInfo) {
	r := j.Resources
	if r.CPUs > 0 || r.CPUsAuto || r.Mem > 0 || r.MemAuto || r.GPUs > 0 || len(r.Named) > 0 {
		s.asked = true
	}
	if s.by == nil {
		s.by = map[useKey]*catUse{}
	}
	k := useKey{j.Queue, j.Target}
	u := s.by[k]
	if u == nil {
		u = &catUse{minCPUs: -1, minMem: -1}
		s.by[k] = u
		s.order = append(s.order, k)
	}
	cpus := max(r.CPUs, 1)
	if u.minCPUs < 0 || cpus < u.minCPUs {
		u.minCPUs = cpus
	}
	u.maxCPUs = max(u.maxCPUs, cpus)
	if u.minMem < 0 || r.Mem < u.minMem {
		u.minMem = r.Mem
	}
	u.maxMem = max(u.maxMem, r.Mem)
	u.cpusAuto = u.cpusAuto || r.CPUsAuto
	u.memAuto = u.memAuto || r.MemAuto
	used := func(finished string, a protocol.Accounting) {
		if finished == "" || !a.Measured() {
			return
		}
		u.runs++
		u.cpu += a.CPUUser + a.CPUSys
		u.elapsed += a.Elapsed
		u.coreS += float64(cpus) * a.Elapsed
		u.peak = max(u.peak, a.MaxRSS)
	}
	used(j.Finished, j.Accounting)
	for _, a := range j.Earlier {
		used(a.Finished, a.Accounting)
	}
}

// print writes the table when some job asked for resources: per
// category, the cores asked and used on average while running, the
// core-hours asked but idle, the memory asked and the largest max RSS.
func (s *Use) Print(w io.Writer) {
	if !s.asked {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tTARGET\tRUNS\tREQCPUS\tCPUS_USED\tIDLE_CORE_H\tREQMEM\tMAXRSS\tMAXRSS/REQ")
	keys := append([]useKey(nil), s.order...)
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].queue != keys[b].queue {
			return keys[a].queue < keys[b].queue
		}
		return keys[a].target < keys[b].target
	})
	for _, k := range keys {
		u := s.by[k]
		cpus := span(int64(u.minCPUs), int64(u.maxCPUs), u.cpusAuto, func(n int64) string { return fmt.Sprint(n) })
		mem := "-" // no job of the category asked for memory
		if u.maxMem > 0 || u.memAuto {
			mem = span(u.minMem, u.maxMem, u.memAuto, func(n int64) string {
				if n == 0 {
					return "0" // some jobs asked, others not: "0-30 GiB"
				}
				return HumanBytes(n)
			})
		}
		usedCPUs, idle, peak, ratio := "-", "-", "-", "-"
		if u.runs > 0 {
			if u.elapsed > 0 {
				usedCPUs = fmt.Sprintf("%.2f", u.cpu/u.elapsed)
			}
			idle = fmt.Sprintf("%.3g", max(u.coreS-u.cpu, 0)/3600)
			peak = HumanBytes(u.peak)
			if u.maxMem > 0 {
				ratio = fmt.Sprintf("%.0f%%", 100*float64(u.peak)/float64(u.maxMem))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", protocol.Printable(k.queue), protocol.Printable(k.target),
			u.runs, cpus, usedCPUs, idle, mem, peak, ratio)
	}
	tw.Flush()
}

// span shows a request shared by a category's jobs ("4"), or its range
// ("2-8") when they differ, "auto" when learned.
func span(lo, hi int64, auto bool, show func(int64) string) string {
	switch {
	case auto:
		return "auto"
	case lo == hi:
		return show(lo)
	default:
		return show(lo) + "-" + show(hi)
	}
}

// HumanBytes is n in B, KiB, MiB...
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n), 0
	for v >= unit && u < 4 {
		v /= unit
		u++
	}
	return fmt.Sprintf("%.3g %ciB", v, " KMGT"[u])
}

// ShortTime is the RFC 3339 time s as a listing shows it: the clock
// only today, the date too on another day, the year as well in another
// year; "-" when there is none.
func ShortTime(s string, now time.Time) string {
	if s == "" {
		return "-"
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return protocol.Printable(s)
	}
	return TimeOf(t, now)
}

// TimeOf is ShortTime of a time that is not text.
func TimeOf(t, now time.Time) string {
	t = t.Local()
	switch y, m, d := t.Date(); {
	case y == now.Year() && m == now.Month() && d == now.Day():
		return t.Format("15:04:05")
	case y == now.Year():
		return t.Format("Jan 02 15:04")
	}
	return t.Format("2006-01-02 15:04")
}
