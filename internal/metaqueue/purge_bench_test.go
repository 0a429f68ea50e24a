package metaqueue

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// BenchmarkPurge purges MQ_PURGE_JOBS ended jobs over 1,000 targets
// (default 100,000; the
// figure in BENCHMARKS.md is for 1,000,000) in batches of MQ_PURGE_BATCH
// (default protocol.DefaultPurgeBatch) while a
// user asks for the summary every millisecond and submits a job every
// 20 ms: it reports jobs purged per second and the longest and 99th
// percentile wait of each, the writer's pauses between batches as a user
// sees them. Setup (a bulk submit, the jobs marked Done in SQL) is not
// timed. Run with -benchtime=1x.
func BenchmarkPurge(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("MQ_PURGE_JOBS")); err == nil && v > 0 {
		n = v
	}
	batch := 0 // the default
	if v, err := strconv.Atoi(os.Getenv("MQ_PURGE_BATCH")); err == nil && v > 0 {
		batch = v
	}
	// MQ_PURGE_INTERLEAVE=1 deals the jobs round-robin over the targets:
	// a batch's jobs then lie all over the target index.
	interleave := os.Getenv("MQ_PURGE_INTERLEAVE") == "1"
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "mq.db")
		opt := Options{Path: path, Sync: SyncSubmit, Lease: time.Minute}
		if os.Getenv("MQ_PURGE_SYNC") == "normal" {
			opt.Sync = SyncNormal // to tell the fsyncs' share
		}
		s, err := Open(ctx, opt)
		if err != nil {
			b.Fatal(err)
		}
		bulk, err := s.NewBulk()
		if err != nil {
			b.Fatal(err)
		}
		const chunk = 5000
		for k := 0; k < n; k += chunk {
			specs := make([]protocol.JobSpec, 0, chunk)
			for j := k; j < min(k+chunk, n); j++ {
				t := j / max(n/1000, 1) // a target's jobs together, as a submit makes them
				if interleave {
					t = j % 1000
				}
				specs = append(specs, protocol.JobSpec{Target: "t" + strconv.Itoa(t), Command: "./simulate --case " + strconv.Itoa(j), Cwd: "/tmp"})
			}
			if err := bulk.Add(k+1, specs); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := bulk.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		s.Close()
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.Exec("UPDATE jobs SET state = 'D', attempts = 1, started = submitted - 1000000, finished = submitted"); err != nil {
			b.Fatal(err)
		}
		db.Close()
		commits := &commitLog{}
		opt.Observer = commits
		if s, err = Open(ctx, opt); err != nil {
			b.Fatal(err)
		}

		stop := make(chan struct{})
		var wg sync.WaitGroup
		var sums, subs []time.Duration
		probe := func(every time.Duration, f func() error, out *[]time.Duration) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(every):
				}
				t0 := time.Now()
				if err := f(); err != nil {
					b.Error(err)
					return
				}
				*out = append(*out, time.Since(t0))
			}
		}
		wg.Add(2)
		go probe(time.Millisecond, func() error { _, err := s.Summary(ctx); return err }, &sums)
		go probe(20*time.Millisecond, func() error {
			_, err := s.Submit(ctx, []protocol.JobSpec{{Target: "live", Command: "true", Cwd: "/tmp"}})
			return err
		}, &subs)
		cpu0 := cpuTime()
		b.StartTimer()
		t0 := time.Now()
		r, err := s.Purger().Run(ctx, protocol.Purge{Select: protocol.Select{All: true}, Batch: batch})
		el := time.Since(t0)
		b.StopTimer()
		cpu := cpuTime() - cpu0
		close(stop)
		wg.Wait()
		if err != nil || r.Purged != int64(n) {
			b.Fatalf("purge = %+v, %v; want %d purged", r, err, n)
		}
		b.ReportMetric(float64(n)/el.Seconds(), "jobs/s")
		// The process's CPU per batch (probes included): on a loaded machine
		// the waits above stretch with the load, this does not.
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(r.Batches), "cpu-ms/batch")
		for _, m := range []struct {
			name string
			d    []time.Duration
		}{{"summary", sums}, {"submit", subs}, {"commit", commits.durable()}} {
			slices.Sort(m.d)
			if len(m.d) > 0 {
				b.ReportMetric(float64(m.d[len(m.d)-1].Microseconds())/1000, m.name+"-max-ms")
				b.ReportMetric(float64(m.d[len(m.d)*99/100].Microseconds())/1000, m.name+"-p99-ms")
			}
		}
		s.Close()
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// commitLog keeps the durations of fsync'd commits (a purge batch's, and
// the probes' submits): how much of a wait is the disk's.
type commitLog struct {
	mu sync.Mutex
	d  []time.Duration
}

func (c *commitLog) Dispatched(latency, wait time.Duration) {}
func (c *commitLog) Ended(to job.State)                     {}
func (c *commitLog) Committed(d time.Duration, durable bool) {
	if durable {
		c.mu.Lock()
		c.d = append(c.d, d)
		c.mu.Unlock()
	}
}

func (c *commitLog) durable() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.d)
}
