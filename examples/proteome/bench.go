package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/driver"
)

// bench runs every configuration, each on a CLS of its own.
func bench(ctx context.Context, o options) error {
	cls := o.cls
	if cls == "" {
		bin, err := os.MkdirTemp("", "proteome-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(bin)
		cls = filepath.Join(bin, "cls")
		build := exec.CommandContext(ctx, "go", "build", "-o", cls, "github.com/mq-hpc/mq/cmd/cls")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build cls: %w", err)
		}
	}
	var all []phase
	for _, proteins := range o.proteins {
		for _, scale := range o.scales {
			ps := proteome(proteins, o.seed, scale)
			for _, n := range o.placeholders {
				for _, b := range o.batchings {
					phs, err := benchOne(ctx, o, cls, ps, n, b)
					if err != nil {
						return fmt.Errorf("%d placeholders, batching %s: %w", n, b, err)
					}
					for i := range phs {
						phs[i].Placeholders, phs[i].Proteins, phs[i].Scale = n, proteins, scale
						if o.json {
							b, _ := json.Marshal(phs[i])
							fmt.Println(string(b))
						}
					}
					if !o.json {
						for _, ph := range phs {
							fmt.Fprintf(os.Stderr, "proteome: %2d PH %-6s %-8s makespan %7.3f s speed-up %6.2f", n, b, ph.Phase, ph.Makespan, ph.Speedup)
							if l := ph.Idle; l != nil {
								fmt.Fprintf(os.Stderr, "  idle %%: first start %.1f, ramp %.1f, middle %.1f, tail %.1f, end lag %.1f",
									100*l.Loss[0], 100*l.Loss[1], 100*l.Loss[2], 100*l.Loss[3], 100*l.Loss[4])
							}
							fmt.Fprintln(os.Stderr)
						}
					}
					all = append(all, phs...)
				}
			}
			if !o.json {
				tables(o, all, proteins, scale)
			}
		}
	}
	return nil
}

// benchOne starts `cls serve --local n` in a fresh MQ_HOME, runs the
// workflow through a driver on it, and stops it.
func benchOne(ctx context.Context, o options, cls string, ps []protein, n int, batching string) ([]phase, error) {
	home, err := os.MkdirTemp("/tmp", "mqpa-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	work := filepath.Join(home, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(cls, append([]string{"serve", "--local", strconv.Itoa(n), "--sync", o.sync}, o.clsFlags...)...)
	cmd.Env = append(os.Environ(), "MQ_HOME="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		self := procCPU(cmd.Process.Pid)
		var agents time.Duration
		for _, c := range childrenOf(cmd.Process.Pid) {
			agents += procCPU(c)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if u, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			tree := time.Duration(u.Utime.Nano() + u.Stime.Nano())
			fmt.Fprintf(os.Stderr, "proteome: %d PH %s: CPU of the CLS %.2f s, its placeholders %.2f s; with their jobs %.2f s\n",
				n, batching, self.Seconds(), agents.Seconds(), tree.Seconds())
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("unix", client.SocketPath(home))
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("cls exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("cls did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Let the placeholders register, so the run measures jobs, not startup;
	// and wait (a while) for other work on the machine to calm down.
	time.Sleep(time.Duration(200+10*n) * time.Millisecond)
	busy := waitQuiet(ctx, 15, 15*time.Second)

	d, err := driver.New(driver.Config{Home: home, Dir: work, Consumers: o.consumers, Buffer: bufferFor(len(ps))})
	if err != nil {
		return nil, err
	}
	if err := d.Start(ctx); err != nil {
		return nil, err
	}
	phs, err := workflow(ctx, d, ps, batching, work)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	d.Stop(sctx)
	cancel()
	if err != nil {
		return nil, err
	}
	for i := range phs {
		phs[i].BusyBefore = busy
		phs[i].slots = n
	}
	return phs, measureWork(ctx, home, phs)
}

// waitQuiet waits until the machine's CPUs are less than pct busy over a
// second (or until max passes) and returns the last busy percentage seen.
func waitQuiet(ctx context.Context, pct float64, max time.Duration) float64 {
	deadline := time.Now().Add(max)
	for {
		a := cpuTimes()
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(time.Second):
		}
		b := cpuTimes()
		busy := -1.0
		if b[1] > a[1] {
			busy = 100 * float64(b[0]-a[0]) / float64(b[1]-a[1])
		}
		if busy < pct || time.Now().After(deadline) {
			return busy
		}
	}
}

// cpuTimes returns busy and total jiffies of all CPUs (/proc/stat).
func cpuTimes() [2]uint64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return [2]uint64{}
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	var busy, total uint64
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return [2]uint64{busy, total}
}

// tables prints the thesis's tables 5.2-5.6 for one proteome: combined
// makespan by batching; BLAST and Parse makespans and speed-ups.
func tables(o options, all []phase, proteins int, scale float64) {
	type key struct {
		ph    int
		b     string
		phase string
	}
	m := map[key]phase{}
	var work = map[string]float64{}
	for _, p := range all {
		if p.Proteins == proteins && p.Scale == scale {
			m[key{p.Placeholders, p.Batching, p.Phase}] = p
			if p.Batching == "none" {
				work[p.Phase] = p.Work
			}
		}
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	table := func(title, phaseName string, speedup bool, batchings []string) {
		fmt.Fprintf(w, "\n%s\t\n", title)
		fmt.Fprint(w, "PHs\t")
		for _, b := range batchings {
			label := b
			if b != "none" && b != "hetero" {
				label = "BF " + b
			}
			fmt.Fprintf(w, "%s\t", label)
		}
		fmt.Fprintln(w)
		for _, n := range o.placeholders {
			fmt.Fprintf(w, "%d\t", n)
			for _, b := range batchings {
				p, ok := m[key{n, b, phaseName}]
				switch {
				case !ok:
					fmt.Fprint(w, "-\t")
				case speedup:
					fmt.Fprintf(w, "%.2f\t", p.Speedup)
				default:
					fmt.Fprintf(w, "%.3f\t", p.Makespan)
				}
			}
			fmt.Fprintln(w)
		}
	}
	var homo []string
	for _, b := range o.batchings {
		if b != "hetero" {
			homo = append(homo, b)
		}
	}
	fmt.Fprintf(w, "%d proteins, time scale %g; makespans in seconds; speed-up = sum of the jobs' own runtimes / makespan\t\n", proteins, scale)
	if work["blast"] > 0 {
		fmt.Fprintf(w, "sum of own runtimes (no batching): BLAST %.3f s, Parse %.3f s\t\n", work["blast"], work["parse"])
	}
	table("Combined BLAST and Parse makespan (cf. table 5.2)", "combined", false, o.batchings)
	table("Combined speed-up", "combined", true, o.batchings)
	table("BLAST makespan (cf. table 5.3)", "blast", false, homo)
	table("BLAST speed-up (cf. table 5.4)", "blast", true, homo)
	table("Parse makespan (cf. table 5.5)", "parse", false, homo)
	table("Parse speed-up (cf. table 5.6)", "parse", true, homo)
	w.Flush()
}

// procCPU is a live process's own CPU time (/proc/PID/stat utime+stime).
func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+st) * time.Second / 100 // USER_HZ
}

// childrenOf lists the live children of pid.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue
		}
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}
