// Command mqbench is the measuring helper of scripts/bench.sh. It is not
// part of mq: it generates workload files, times commands, and watches a
// running CLS through the same summary request `mqstat --summary` makes
// (in-process, so that polling every millisecond does not fork a process
// per sample on a 2-core machine).
//
//	mqbench gen -targets T -per K [-prereqs] [-prefix P] [-cmd C] -o FILE
//	mqbench times -n N [-warmup W] -- CMD ARGS...
//	mqbench drain -n N -- CMD ARGS...    run CMD (a submit), then wait for N more Done jobs
//	mqbench rate [-feed N] [-warmup D] [-window D]  rate of Done growth of a running CLS
//	mqbench rounds -rounds R -targets T -per K [-prereqs]
//	mqbench ready                         wait until the CLS answers
//	mqbench hops [-rounds R] [-width W] [-cmd C]  dependency hop latency, slots idle
//	mqbench wfreplay [-slots N] [-bound D] [-policy P] [-est] [-gate] [-planner NAME] TRACE...  replay WfFormat traces as sleeps
//	mqbench wfideal [-slots N] TRACE...  FCFS and cp list schedules of WfFormat traces, no overhead
//	mqbench wfsearch [-slots N] [-seed S] [-evals E] [-time D] [-order DIR] TRACE...  search priority lists, no overhead
//	mqbench stage -addr H:P -user U -key K -known-hosts F -src DIR ...  staging throughput
//
// Results are printed as key=value lines for the script to parse.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

func main() {
	if len(os.Args) < 2 {
		fatalf("usage: mqbench gen|times|drain|rate|rounds|ready|hops|wfreplay|wfideal|wfsearch|stage ...")
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "gen":
		err = gen(args)
	case "times":
		err = times(args)
	case "drain":
		err = drain(args)
	case "rate":
		err = rate(args)
	case "rounds":
		err = rounds(args)
	case "ready":
		err = ready(args)
	case "wfreplay":
		err = wfreplay(args)
	case "wfideal":
		err = wfideal(args)
	case "wfsearch":
		err = wfsearch(args)
	case "hops":
		err = hops(args)
	case "stage":
		err = stageBench(args)
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	if err != nil {
		fatalf("mqbench %s: %v", cmd, err)
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}

// ---- workload ----

// workload writes the benchmark's job shape: targets t0..tT-1 (with a
// prefix), K jobs each; with prereqs, every odd target depends on the even
// target before it, so half the jobs start Waiting and become Queued when
// their prerequisite target is done.
type workload struct {
	targets, per int
	prereqs      bool
	prefix       string
	cmd          string // "" = a realistic-looking command line; else used as is
}

func (w workload) each(fn func(js protocol.JobSpec)) {
	for t := 0; t < w.targets; t++ {
		name := w.prefix + "t" + strconv.Itoa(t)
		var pre []string
		if w.prereqs && t%2 == 1 {
			pre = []string{w.prefix + "t" + strconv.Itoa(t-1)}
		}
		for k := 0; k < w.per; k++ {
			c := w.cmd
			if c == "" {
				c = fmt.Sprintf("./simulate --case %d --rep %d > out/case%d.%d.txt", t, k, t, k)
			}
			fn(protocol.JobSpec{Target: name, Prereqs: pre, Command: c})
		}
	}
}

func (w *workload) flags(fs *flag.FlagSet) {
	fs.IntVar(&w.targets, "targets", 100000, "targets")
	fs.IntVar(&w.per, "per", 10, "jobs per target")
	fs.BoolVar(&w.prereqs, "prereqs", true, "odd targets depend on the even target before them")
	fs.StringVar(&w.prefix, "prefix", "", "prefix of target names")
	fs.StringVar(&w.cmd, "cmd", "", `command of every job ("" = ./simulate --case T --rep K > out/...)`)
}

func gen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	var w workload
	w.flags(fs)
	out := fs.String("o", "", "output file")
	fs.Parse(args)
	if *out == "" {
		return errors.New("-o is required")
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	n, withPre := 0, 0
	w.each(func(js protocol.JobSpec) {
		bw.WriteString(`{"target":`)
		bw.WriteString(strconv.Quote(js.Target))
		if len(js.Prereqs) > 0 {
			bw.WriteString(`,"prereqs":[`)
			bw.WriteString(strconv.Quote(js.Prereqs[0]))
			bw.WriteString(`]`)
			withPre++
		}
		bw.WriteString(`,"command":`)
		bw.WriteString(strconv.Quote(js.Command))
		bw.WriteString("}\n")
		n++
	})
	if err := bw.Flush(); err != nil {
		return err
	}
	st, _ := f.Stat()
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("jobs=%d targets=%d with_prereq=%d bytes=%d\n", n, w.targets, withPre, st.Size())
	return nil
}

// ---- timing commands ----

func runQuiet(argv []string) error {
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdout = nil // /dev/null
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// nearest rank
	i := int(p*float64(len(sorted))+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func ms(d time.Duration) string { return strconv.FormatFloat(d.Seconds()*1000, 'f', 2, 64) }

func times(args []string) error {
	fs := flag.NewFlagSet("times", flag.ExitOnError)
	n := fs.Int("n", 20, "runs")
	warm := fs.Int("warmup", 3, "untimed runs first")
	clsPID := fs.Int("cls", 0, "pid of a CLS the command talks to (its CPU is not counted as disturbance)")
	fs.Parse(args)
	argv := fs.Args()
	if len(argv) == 0 {
		return errors.New("missing command")
	}
	for i := 0; i < *warm; i++ {
		if err := runQuiet(argv); err != nil {
			return err
		}
	}
	ds := make([]time.Duration, 0, *n)
	c0, ok0 := snapCPU(*clsPID)
	dist := startDisturbance()
	for i := 0; i < *n; i++ {
		t0 := time.Now()
		if err := runQuiet(argv); err != nil {
			return err
		}
		ds = append(ds, time.Since(t0))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	clsTicks := int64(0)
	if *clsPID > 0 {
		c1, ok1 := snapCPU(*clsPID)
		if ok0 && ok1 {
			clsTicks = c1.sub(c0)
		}
	}
	fmt.Printf("runs=%d min_ms=%s median_ms=%s p90_ms=%s max_ms=%s mean_ms=%s%s\n", len(ds), ms(ds[0]),
		ms(percentile(ds, 0.5)), ms(percentile(ds, 0.9)), ms(ds[len(ds)-1]), ms(sum/time.Duration(len(ds))), dist.others(clsTicks))
	return nil
}

// ---- CPU accounting ----

// disturbance measures CPU that other work on the machine used during a
// measurement: all busy time (/proc/stat) less this process, its reaped
// children, and the CLS tree's own use (given by the caller). It is a
// percentage of the machine's capacity; more than a few percent means the
// number next to it was disturbed.
type disturbance struct{ busy, total, own int64 }

func machineTicks() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i := 1; i < len(f); i++ {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		if i > 8 { // guest time is already in user
			break
		}
		total += v
		if i != 4 && i != 5 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

func ownTicks() int64 {
	var t int64
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			t += (ru.Utime.Sec+ru.Stime.Sec)*clkTck + (int64(ru.Utime.Usec)+int64(ru.Stime.Usec))*clkTck/1e6
		}
	}
	return t
}

func startDisturbance() disturbance {
	b, t := machineTicks()
	return disturbance{busy: b, total: t, own: ownTicks()}
}

// others formats the share of the machine that other work used since d,
// given the ticks the measured system (not this process) used meanwhile.
func (d disturbance) others(system int64) string {
	b, t := machineTicks()
	if t <= d.total {
		return ""
	}
	o := (b - d.busy) - (ownTicks() - d.own) - system
	return " others_cpu_pct=" + strconv.FormatFloat(max(0, float64(o))*100/float64(t-d.total), 'f', 0, 64)
}

func (c cpuSnap) sub(o cpuSnap) int64 {
	return (c.cls - o.cls) + (c.agents - o.agents) + (c.jobs - o.jobs)
}

// cpuSnap is CPU time, in clock ticks, of a CLS process, of its live
// children (the local placeholders), and of the placeholders' reaped
// children (the jobs' processes).
type cpuSnap struct{ cls, agents, jobs int64 }

const clkTck = 100 // USER_HZ on Linux

func procTicks(pid string) (self, children int64, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, 0, false
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k-3], 10, 64); return v }
	return n(14) + n(15), n(16) + n(17), true
}

func childPIDs(pid string) []string {
	var out []string
	tasks, _ := os.ReadDir("/proc/" + pid + "/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + pid + "/task/" + t.Name() + "/children")
		if err == nil {
			out = append(out, strings.Fields(string(b))...)
		}
	}
	return out
}

func snapCPU(pid int) (cpuSnap, bool) {
	if pid <= 0 {
		return cpuSnap{}, false
	}
	p := strconv.Itoa(pid)
	self, _, ok := procTicks(p)
	if !ok {
		return cpuSnap{}, false
	}
	c := cpuSnap{cls: self}
	for _, k := range childPIDs(p) {
		if a, j, ok := procTicks(k); ok {
			c.agents += a
			c.jobs += j
		}
	}
	return c, true
}

// cpuPerJob formats CPU microseconds per job between two snapshots.
func cpuPerJob(a, b cpuSnap, okA, okB bool, jobs int) string {
	if !okA || !okB || jobs <= 0 {
		return ""
	}
	us := func(t int64) string {
		return strconv.FormatFloat(float64(t)*1e6/clkTck/float64(jobs), 'f', 0, 64)
	}
	return " cls_cpu_us_per_job=" + us(b.cls-a.cls) + " agents_cpu_us_per_job=" + us(b.agents-a.agents) +
		" jobprocs_cpu_us_per_job=" + us(b.jobs-a.jobs)
}

// ---- watching the CLS ----

type counts struct{ byState map[string]int }

func (c counts) get(states string) int {
	n := 0
	for _, s := range states {
		n += c.byState[string(s)]
	}
	return n
}

func dial(ctx context.Context) (*client.Client, error) {
	home, err := client.Home()
	if err != nil {
		return nil, err
	}
	return client.Dial(ctx, home, protocol.RoleUser, "mqbench")
}

func summary(ctx context.Context, cl *client.Client) (counts, error) {
	r, err := client.Do(ctx, cl, protocol.OpSummary, protocol.Empty{})
	if err != nil {
		return counts{}, err
	}
	c := counts{byState: map[string]int{}}
	for _, q := range r.Queues {
		for k, v := range q.Counts {
			c.byState[k] += v
		}
	}
	return c, nil
}

func ready(args []string) error {
	fs := flag.NewFlagSet("ready", flag.ExitOnError)
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after")
	fs.Parse(args)
	deadline := time.Now().Add(*timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cl, err := dial(ctx)
		if err == nil {
			_, err = summary(ctx, cl)
			cl.Close()
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// drain runs a command (a submit) and waits until n more jobs are Done
// than before it started: the time from submit to all Done.
func drain(args []string) error {
	fs := flag.NewFlagSet("drain", flag.ExitOnError)
	n := fs.Int("n", 0, "jobs the command submits")
	// 20 ms resolves a run of seconds to under 1 %; polling every 2 ms cost
	// the CLS 50-80 us of CPU per job at 1,000 true jobs/s, which the jobs
	// then lacked.
	poll := fs.Duration("poll", 20*time.Millisecond, "summary poll interval")
	clsPID := fs.Int("cls", 0, "pid of the CLS, to report CPU per job")
	fs.Parse(args)
	argv := fs.Args()
	if *n <= 0 || len(argv) == 0 {
		return errors.New("need -n N and a command")
	}
	ctx := context.Background()
	cl, err := dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	c0, err := summary(ctx, cl)
	if err != nil {
		return err
	}
	cpu0, ok0 := snapCPU(*clsPID)
	dist := startDisturbance()
	t0 := time.Now()
	if err := runQuiet(argv); err != nil {
		return err
	}
	submitted := time.Since(t0)
	if err := waitDone(ctx, cl, c0, *n, *poll); err != nil {
		return err
	}
	el := time.Since(t0)
	cpu1, ok1 := snapCPU(*clsPID)
	fmt.Printf("jobs=%d submit_s=%.3f total_s=%.3f jobs_per_s=%.0f%s%s\n", *n, submitted.Seconds(), el.Seconds(),
		float64(*n)/el.Seconds(), cpuPerJob(cpu0, cpu1, ok0, ok1, *n), dist.others(cpu1.sub(cpu0)))
	return nil
}

// waitDone polls the CLS's summary until n more jobs than in c0 are Done;
// a job ending Failed, Blocked or Deleted meanwhile is an error.
func waitDone(ctx context.Context, cl *client.Client, c0 counts, n int, poll time.Duration) error {
	for {
		c, err := summary(ctx, cl)
		if err != nil {
			return err
		}
		if c.get("FBX") > c0.get("FBX") {
			return fmt.Errorf("jobs failed: %v", c.byState)
		}
		if c.get("D")-c0.get("D") >= n {
			return nil
		}
		time.Sleep(poll)
	}
}

// rate measures how fast Done grows on a CLS that is draining a backlog:
// it waits for the first Done, lets warmup pass (or a fifth of the backlog
// drain, if sooner), then counts Done over the
// window (ending early, and saying so, if the backlog runs low). With
// -feed N it keeps the backlog itself: whenever fewer than N/2 jobs are
// pending (W+Q+E) it submits N more (N/10 new targets x 10, half waiting on
// a prerequisite), so about N jobs are pending throughout.
func rate(args []string) error {
	fs := flag.NewFlagSet("rate", flag.ExitOnError)
	warmup := fs.Duration("warmup", 2*time.Second, "time after the first Done before the window opens")
	window := fs.Duration("window", 10*time.Second, "measuring window")
	clsPID := fs.Int("cls", 0, "pid of the CLS, to report CPU per job")
	feed := fs.Int("feed", 0, "keep about this many jobs pending (0 = drain what is queued)")
	fs.Parse(args)
	ctx := context.Background()
	cl, err := dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	cwd, _ := os.Getwd()
	batches := 0
	var pendSum, pendN int
	var pendMin, pendMax = -1, 0
	top := func(c counts) error {
		if *feed <= 0 || c.get("WQE") >= *feed/2 {
			return nil
		}
		w := workload{targets: *feed / 10, per: 10, prereqs: true, prefix: fmt.Sprintf("f%d.", batches), cmd: "true"}
		specs := make([]protocol.JobSpec, 0, *feed)
		w.each(func(js protocol.JobSpec) {
			js.Queue, js.Cwd = protocol.DefaultQueue, cwd
			specs = append(specs, js)
		})
		batches++
		_, err := client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: specs})
		return err
	}
	tick := 100 * time.Millisecond
	if *feed > 0 {
		tick = 10 * time.Millisecond
	}
	c, err := summary(ctx, cl)
	if err != nil {
		return err
	}
	d0, pendingFirst := c.get("D"), c.get("WQE")
	for c.get("D") == d0 {
		if err := top(c); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
		if c, err = summary(ctx, cl); err != nil {
			return err
		}
	}
	for t := time.Now(); time.Since(t) < *warmup; {
		if *feed == 0 && c.get("WQE") < pendingFirst*8/10 {
			break // a small backlog: keep the rest for the window
		}
		if err := top(c); err != nil {
			return err
		}
		time.Sleep(tick)
		if c, err = summary(ctx, cl); err != nil {
			return err
		}
	}
	start, err := summary(ctx, cl)
	if err != nil {
		return err
	}
	pending0 := start.get("WQE")
	t0 := time.Now()
	cpu0, ok0 := snapCPU(*clsPID)
	dist := startDisturbance()
	low := pending0 / 10
	end := start
	for time.Since(t0) < *window {
		if err := top(end); err != nil {
			return err
		}
		time.Sleep(tick)
		if end, err = summary(ctx, cl); err != nil {
			return err
		}
		p := end.get("WQE")
		pendSum += p
		pendN++
		if pendMin < 0 || p < pendMin {
			pendMin = p
		}
		pendMax = max(pendMax, p)
		if *feed == 0 && end.get("WQ") <= low {
			break
		}
	}
	el := time.Since(t0)
	cpu1, ok1 := snapCPU(*clsPID)
	done := end.get("D") - start.get("D")
	fmt.Printf("window_s=%.2f done=%d jobs_per_s=%.0f pending_at_start=%d pending_at_end=%d pending_mean=%d pending_min=%d pending_max=%d failed=%d%s%s\n",
		el.Seconds(), done, float64(done)/el.Seconds(), start.get("WQE"), end.get("WQE"), pendSum/max(pendN, 1), pendMin, pendMax,
		end.get("FB"), cpuPerJob(cpu0, cpu1, ok0, ok1, done), dist.others(cpu1.sub(cpu0)))
	if el < *window/2 {
		fmt.Fprintf(os.Stderr, "mqbench rate: the backlog ran low after %.2fs; window shorter than asked\n", el.Seconds())
	}
	return nil
}

// rounds submits R batches of T*K jobs (one transaction each, like one
// `mqsub -f`) to an idle CLS and times each from the submit's reply to its
// last job Done: scheduling with a backlog of at most T*K jobs.
func rounds(args []string) error {
	fs := flag.NewFlagSet("rounds", flag.ExitOnError)
	var w workload
	w.flags(fs)
	r := fs.Int("rounds", 20, "rounds")
	poll := fs.Duration("poll", time.Millisecond, "summary poll interval")
	clsPID := fs.Int("cls", 0, "pid of the CLS, to report CPU per job")
	fs.Parse(args)
	ctx := context.Background()
	cl, err := dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	cwd, _ := os.Getwd()
	var total time.Duration
	var per []time.Duration
	jobs := 0
	var cpuSum cpuSnap
	cpuOK := true
	for i := 0; i < *r; i++ {
		w.prefix = fmt.Sprintf("r%d.", i)
		var specs []protocol.JobSpec
		w.each(func(js protocol.JobSpec) {
			js.Queue, js.Cwd = protocol.DefaultQueue, cwd
			specs = append(specs, js)
		})
		c0, err := summary(ctx, cl)
		for wait := time.Now(); err == nil && c0.get("WQE") != 0; c0, err = summary(ctx, cl) {
			if time.Since(wait) > time.Minute {
				return fmt.Errorf("CLS not idle before round %d: %v", i, c0.byState)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			return err
		}
		base := c0.get("D")
		_, err = client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: specs})
		if err != nil {
			return err
		}
		cpu0, ok0 := snapCPU(*clsPID)
		t0 := time.Now()
		for {
			c, err := summary(ctx, cl)
			if err != nil {
				return err
			}
			if c.get("FB") > c0.get("FB") {
				return fmt.Errorf("jobs failed: %v", c.byState)
			}
			if c.get("D")-base >= len(specs) {
				break
			}
			time.Sleep(*poll)
		}
		d := time.Since(t0)
		cpu1, ok1 := snapCPU(*clsPID)
		cpuOK = cpuOK && ok0 && ok1
		cpuSum.cls += cpu1.cls - cpu0.cls
		cpuSum.agents += cpu1.agents - cpu0.agents
		cpuSum.jobs += cpu1.jobs - cpu0.jobs
		per = append(per, d)
		total += d
		jobs += len(specs)
	}
	sort.Slice(per, func(i, j int) bool { return per[i] < per[j] })
	fmt.Printf("rounds=%d jobs_per_round=%d jobs=%d jobs_per_s=%.0f round_median_ms=%s round_min_ms=%s round_max_ms=%s%s\n",
		*r, jobs / *r, jobs, float64(jobs)/total.Seconds(), ms(percentile(per, 0.5)), ms(per[0]), ms(per[len(per)-1]),
		cpuPerJob(cpuSnap{}, cpuSum, cpuOK && *clsPID > 0, true, jobs))
	return nil
}
