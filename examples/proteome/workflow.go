package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/driver"
	"github.com/mq-hpc/mq/protocol"
)

// protein is one synthetic protein: its sequence size and what its two
// jobs take (thesis table 6.1; the other three follow the sequence size).
type protein struct {
	seq          int           // sequence file size, bytes (250-850)
	blast, parse time.Duration // runtimes, scaled
	hom          int           // homologue file size, bytes (5,000-85,000)
}

func proteome(n int, seed int64, scale float64) []protein {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	ps := make([]protein, n)
	for i := range ps {
		f := r.Float64() // position of the sequence size in its range
		sec := func(lo, hi float64) time.Duration {
			return time.Duration((lo + (hi-lo)*f) * scale * float64(time.Second))
		}
		ps[i] = protein{seq: 250 + int(600*f), blast: sec(2.0, 8.0), parse: sec(0.5, 0.7), hom: 5000 + int(80000*f)}
	}
	return ps
}

func blastCmd(dir string, i int, p protein) string {
	return fmt.Sprintf("sleep %.4f; head -c %d /dev/zero > %s/p%d.hom", p.blast.Seconds(), p.hom, dir, i)
}

func parseCmd(dir string, i int, p protein) string {
	return fmt.Sprintf("sleep %.4f; cat %s/p%d.hom > /dev/null", p.parse.Seconds(), dir, i)
}

// phase is one measured phase of a run.
type phase struct {
	Placeholders int     `json:"placeholders,omitempty"`
	Batching     string  `json:"batching"`
	Phase        string  `json:"phase"` // blast, parse, or combined
	Makespan     float64 `json:"makespan_s"`
	Speedup      float64 `json:"speedup"`
	Jobs         int     `json:"jobs"`
	Work         float64 `json:"work_s"`    // sum of the jobs' own runtimes
	Nominal      float64 `json:"nominal_s"` // sum of the drawn (sleep) runtimes
	// SpeedupNominal is Nominal / Makespan: the speed-up over running the
	// drawn runtimes back to back, with no per-job cost at all.
	SpeedupNominal float64 `json:"speedup_nominal"`
	Proteins       int     `json:"proteins"`
	Scale          float64 `json:"scale"`
	// BusyBefore is how busy (%) the machine's CPUs were just before the
	// run, with the CLS and its placeholders idle: other people's work.
	BusyBefore float64 `json:"busy_before_pct"`
	// Where the placeholders' idle time went (slot-seconds: slots x
	// makespan - work; see idleBreakdown), when the slot count is known.
	Idle       *idle `json:"idle,omitempty"`
	ids        []int64
	start, end time.Time // the phase as the driver saw it
	slots      int       // placeholders, for the idle breakdown
}

// workflow runs the PA workflow through d: BLAST phase then Parse phase,
// each ended by a barrier, or (hetero) one pipeline per protein.
func workflow(ctx context.Context, d *driver.Driver, ps []protein, batching, dir string) ([]phase, error) {
	var opt func(kind string, i int) []driver.Option
	switch batching {
	case "none":
		opt = func(string, int) []driver.Option { return nil }
	case "hetero":
		opt = func(_ string, i int) []driver.Option { return []driver.Option{driver.Group("p" + strconv.Itoa(i))} }
	default:
		bf, _ := strconv.Atoi(batching)
		for _, g := range []string{"blast", "parse"} {
			if err := d.SetGroup(g, bf); err != nil {
				return nil, err
			}
		}
		opt = func(kind string, _ int) []driver.Option { return []driver.Option{driver.Group(kind)} }
	}
	exec := func(cmd string, opts []driver.Option) error {
		_, err := d.Exec(ctx, cmd, opts...)
		return err
	}
	barrier := func(name string, start time.Time, nominal time.Duration) (phase, error) {
		rs, err := d.WaitForAll(ctx)
		end := time.Now()
		ph := phase{Batching: batching, Phase: name, Makespan: end.Sub(start).Seconds(), Jobs: len(rs), Nominal: nominal.Seconds(), start: start, end: end}
		if err != nil {
			return ph, fmt.Errorf("%s phase: %w", name, err)
		}
		for _, r := range rs {
			if r.Exit != 0 {
				return ph, fmt.Errorf("%s phase: job %d exited %d", name, r.ID, r.Exit)
			}
			ph.ids = append(ph.ids, r.ID)
		}
		return ph, nil
	}
	if batching == "hetero" {
		start := time.Now()
		var nominal time.Duration
		for i, p := range ps {
			if err := d.CreatePipeline("p"+strconv.Itoa(i), 2); err != nil {
				return nil, err
			}
			if err := exec(blastCmd(dir, i, p), opt("blast", i)); err != nil {
				return nil, err
			}
			if err := exec(parseCmd(dir, i, p), opt("parse", i)); err != nil {
				return nil, err
			}
			nominal += p.blast + p.parse
		}
		ph, err := barrier("combined", start, nominal)
		return []phase{ph}, err
	}
	var out []phase
	for _, kind := range []string{"blast", "parse"} {
		start := time.Now()
		var nominal time.Duration
		for i, p := range ps {
			cmd, rt := blastCmd(dir, i, p), p.blast
			if kind == "parse" {
				cmd, rt = parseCmd(dir, i, p), p.parse
			}
			if err := exec(cmd, opt(kind, i)); err != nil {
				return nil, err
			}
			nominal += rt
		}
		ph, err := barrier(kind, start, nominal)
		if err != nil {
			return nil, err
		}
		out = append(out, ph)
	}
	out = append(out, phase{Batching: batching, Phase: "combined", Makespan: out[0].Makespan + out[1].Makespan,
		Jobs: out[0].Jobs + out[1].Jobs, Nominal: out[0].Nominal + out[1].Nominal, ids: append(append([]int64(nil), out[0].ids...), out[1].ids...)})
	return out, nil
}

// measureWork fills each phase's work (sum of its jobs' own runtimes, as
// the metaqueue recorded them) and speed-up.
func measureWork(ctx context.Context, home string, phs []phase) error {
	cl, err := client.Dial(ctx, home, protocol.RoleUser, "proteome")
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := range phs {
		ph := &phs[i]
		var work time.Duration
		var spans []span
		for lo := 0; lo < len(ph.ids); lo += 5000 {
			ids := ph.ids[lo:min(lo+5000, len(ph.ids))]
			err := client.Stream(ctx, cl, protocol.OpStat, protocol.Stat{IDs: ids, States: "DF"}, func(r protocol.StatReply) error {
				for _, j := range r.Jobs {
					s, err1 := time.Parse(time.RFC3339Nano, j.Started)
					f, err2 := time.Parse(time.RFC3339Nano, j.Finished)
					if err1 != nil || err2 != nil {
						return fmt.Errorf("job %d: times %q %q", j.ID, j.Started, j.Finished)
					}
					work += f.Sub(s)
					spans = append(spans, span{s, f})
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		ph.Work = work.Seconds()
		if ph.slots > 0 && !ph.start.IsZero() {
			ph.Idle = idleBreakdown(ph.start, ph.end, ph.slots, spans)
		}
		if ph.Makespan > 0 {
			ph.Speedup = ph.Work / ph.Makespan
			ph.SpeedupNominal = ph.Nominal / ph.Makespan
		}
	}
	return nil
}

// once runs the workflow a single time: on the CLS of $MQ_HOME if one
// answers, else locally.
func once(ctx context.Context, o options) error {
	home, _ := client.Home()
	cfg := driver.Config{Consumers: o.consumers, Buffer: bufferFor(o.proteins[0])}
	if home != "" {
		if cl, err := client.Dial(ctx, home, "", "proteome"); err == nil {
			cl.Close()
			cfg.Home = home
		}
	}
	dir, err := os.MkdirTemp("", "proteome-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Dir = dir
	d, err := driver.New(cfg)
	if err != nil {
		return err
	}
	if err := d.Start(ctx); err != nil {
		return err
	}
	defer d.Stop(context.Background())
	where := "locally (no CLS answers at $MQ_HOME)"
	if cfg.Home != "" {
		where = "on the CLS at " + cfg.Home
	}
	fmt.Fprintf(os.Stderr, "proteome: %d proteins, batching %s, scale %g, %s\n", o.proteins[0], o.batchings[0], o.scales[0], where)
	phs, err := workflow(ctx, d, proteome(o.proteins[0], o.seed, o.scales[0]), o.batchings[0], filepath.Clean(dir))
	if err != nil {
		return err
	}
	if cfg.Home != "" {
		if err := measureWork(ctx, cfg.Home, phs); err != nil {
			return err
		}
	}
	for _, ph := range phs {
		ph.Proteins, ph.Scale = o.proteins[0], o.scales[0]
		if o.json {
			b, _ := json.Marshal(ph)
			fmt.Println(string(b))
			continue
		}
		fmt.Printf("%-8s %5d jobs  makespan %8.3f s  nominal work %8.3f s", ph.Phase, ph.Jobs, ph.Makespan, ph.Nominal)
		if ph.Work > 0 {
			fmt.Printf("  measured work %8.3f s  speed-up %.2f", ph.Work, ph.Speedup)
		}
		fmt.Println()
	}
	return nil
}

// bufferFor sizes the driver's buffer so the whole proteome fits.
func bufferFor(proteins int) int { return min(driver.MaxBuffer, max(driver.MinBuffer, 2*proteins)) }
