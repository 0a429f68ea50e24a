package inspect

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/protocol"
)

// fillJobs writes n jobs of one queue and target to w: every 1,000th
// failed, every 1,000th (offset 500) queued, the others done, as a
// metaqueue where most jobs have ended looks.
func fillJobs(t testing.TB, w *sql.Conn, n int) {
	t.Helper()
	for _, q := range []string{
		"INSERT INTO queues (id, name, created) VALUES (1, 'default', 0)",
		"INSERT INTO targets (id, name) VALUES (1, 't')",
		fmt.Sprintf(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d)
		INSERT INTO jobs (id, queue_id, target_id, state, command, cwd, submitted)
		SELECT i, 1, 1, CASE i %% 1000 WHEN 0 THEN 'F' WHEN 500 THEN 'Q' ELSE 'D' END, 'echo ' || i, '/tmp', i FROM s`, n),
	} {
		if _, err := w.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkStateListing is a dashboard page of jobs by state (100 jobs
// and one more) at 100,000 jobs, of which 100 failed and 100 queued:
// "scan" finds a state few jobs are in by reading every job in id order,
// "kept" names them from the core's sets (bystate). (An index on jobs
// (state, id), even partial, makes each UPDATE of a job's state about
// twice as dear, 10-20 % of a dispatch's CPU: BENCHMARKS.md, "Dashboard
// cost".)
func BenchmarkStateListing(b *testing.B) {
	w := modtest.NewDB(b)
	fillJobs(b, w, 100000)
	for _, src := range []struct {
		name string
		src  Sources
	}{{"scan", nil}, {"kept", keptStates(b, w)}} {
		b.Run(src.name, func(b *testing.B) { benchStateListing(b, New(w, "", src.src)) })
	}
}

func benchStateListing(b *testing.B, r *Reader) {
	// The 100 queued jobs named, as the dashboard names the jobs running
	// now (from the core's memory) in its listing of state E.
	var queued []int64
	for id := int64(500); id <= 100000; id += 1000 {
		queued = append(queued, id)
	}
	for _, tc := range []struct {
		name   string
		states string
		after  int64
		ids    []int64
	}{{"F", "F", 0, nil}, {"F-after-50k", "F", 50000, nil}, {"Q", "Q", 0, nil}, {"Q-named", "Q", 0, queued},
		{"E-none", "E", 0, nil}, {"D", "D", 0, nil}, {"all", "", 0, nil}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := r.Page(b.Context(), protocol.Stat{States: tc.states, IDs: tc.ids}, tc.after, 101); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQueueListing is the dashboard's first page of a queue's jobs
// (/jobs?queue=, 100 jobs and one more) at 100,000 jobs (1,000,000 with
// MQ_BENCH_BIG=1): "small", a queue of 40 jobs submitted together late,
// and "default", every other job. "scan" reads the jobs in id order
// until the page is full (all of them for the small queue), "kept" reads
// the queue's runs of ids the core keeps (bystate.Spans).
func BenchmarkQueueListing(b *testing.B) {
	n := 100_000
	if os.Getenv("MQ_BENCH_BIG") != "" {
		n = 1_000_000
	}
	w := modtest.NewDB(b)
	fillJobs(b, w, n)
	for _, q := range []string{
		"INSERT INTO queues (id, name, created) VALUES (2, 'small', 0)",
		fmt.Sprintf("UPDATE jobs SET queue_id = 2 WHERE id BETWEEN %d AND %d", n-1000, n-961),
	} {
		if _, err := w.ExecContext(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
	for _, src := range []struct {
		name string
		src  Sources
	}{{"scan", nil}, {"kept", keptStates(b, w)}} {
		r := New(w, "", src.src)
		for _, queue := range []string{"small", "default"} {
			b.Run(fmt.Sprintf("%s/%s/jobs=%d", src.name, queue, n), func(b *testing.B) {
				for b.Loop() {
					js, err := r.Page(b.Context(), protocol.Stat{Queue: queue}, 0, 101)
					if want := map[string]int{"small": 40, "default": 101}[queue]; err != nil || len(js) != want {
						b.Fatal(len(js), err)
					}
				}
			})
		}
	}
}

// BenchmarkJobOutput is what mqstat --cat asks per job of an export (and
// mqstat -j, a dashboard job page, of a job): its row, attempts and where
// its output lies, at 10,000 jobs.
func BenchmarkJobOutput(b *testing.B) {
	w := modtest.NewDB(b)
	fillJobs(b, w, 10000)
	r := New(w, "", nil)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := r.JobOutput(ctx, int64(i%10000+1)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrefixListing is a listing by target prefix (mq-status's of
// a Snakemake run) at 100,000 jobs (1,000,000 with MQ_BENCH_BIG=1) of
// 100 runs, each 1% of the jobs submitted together under 10 targets
// (run042.r0 .. run042.r9), every even run's last tenth a job array:
// "run" lists one run's jobs, "every-run" all of them (read in id order
// either way); "collapsed" leaves the arrays' members out
// (Stat.Collapse), "listed" does not.
func BenchmarkPrefixListing(b *testing.B) {
	n := 100_000
	if os.Getenv("MQ_BENCH_BIG") != "" {
		n = 1_000_000
	}
	per := n / 100
	w := modtest.NewDB(b)
	for _, q := range []string{
		"INSERT INTO queues (id, name, created) VALUES (1, 'default', 0)",
		`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 999)
		INSERT INTO targets (id, name) SELECT i + 1, printf('run%03d.r%d', i / 10, i % 10) FROM s`,
		fmt.Sprintf(`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < %d)
		INSERT INTO jobs (id, queue_id, target_id, state, command, cwd, submitted)
		SELECT i + 1, 1, (i / %d) * 10 + i %% 10 + 1, CASE i %% 7 WHEN 0 THEN 'Q' ELSE 'D' END, 'echo ' || i, '/tmp', i FROM s`, n-1, per),
		fmt.Sprintf(`WITH RECURSIVE s(k) AS (SELECT 0 UNION ALL SELECT k + 2 FROM s WHERE k < 98)
		INSERT INTO arrays (first_job, last_job) SELECT k * %d + %d + 1, (k + 1) * %d FROM s`, per, per-per/10, per),
	} {
		if _, err := w.ExecContext(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
	r := New(w, "", nil)
	for _, tc := range []struct {
		name, prefix string
		collapse     bool
		want         int
	}{
		{"run/listed", "run042.", false, per}, {"run/collapsed", "run042.", true, per - per/10},
		{"every-run/collapsed", "run", true, n - 50*(per/10)},
	} {
		b.Run(fmt.Sprintf("%s/jobs=%d", tc.name, n), func(b *testing.B) {
			for b.Loop() {
				got := 0
				st := protocol.Stat{TargetPrefix: tc.prefix, States: "WQHPEDFBX", Collapse: tc.collapse}
				if err := r.Stat(b.Context(), st, 0, func(js []protocol.JobInfo) error { got += len(js); return nil }); err != nil || got != tc.want {
					b.Fatal(got, err)
				}
			}
		})
	}
}
