package metaqueue

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2024, 3, 4, 5, 6, 7, 123456789, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is one test's store.
type env struct {
	t     *testing.T
	s     *Store
	clock *clock
	opt   Options
}

const testLease = 10 * time.Second

func newEnv(t *testing.T) *env { return newEnvWith(t, nil) }

func newEnvWith(t *testing.T, mod func(*Options)) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, clock: newClock()}
	e.opt = Options{Path: filepath.Join(dir, "mq.db"), Sync: SyncNormal, Lease: testLease, Now: e.clock.Now, CheckConstraints: true}
	if mod != nil {
		mod(&e.opt)
	}
	e.open()
	t.Cleanup(func() {
		if e.s != nil {
			e.s.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	s, err := Open(context.Background(), e.opt)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.s = s
}

// reopen closes the store and opens it again on the same file.
func (e *env) reopen() {
	e.t.Helper()
	if err := e.s.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.s = nil
	e.open()
}

func spec(target, command string, prereqs ...string) protocol.JobSpec {
	return protocol.JobSpec{Target: target, Command: command, Prereqs: prereqs}
}

func (e *env) submit(specs ...protocol.JobSpec) []int64 {
	e.t.Helper()
	ids, err := e.s.Submit(context.Background(), specs)
	if err != nil {
		e.t.Fatalf("Submit: %v", err)
	}
	if len(ids) != len(specs) {
		e.t.Fatalf("Submit returned %d ids for %d jobs", len(ids), len(specs))
	}
	return ids
}

func (e *env) submit1(target, command string, prereqs ...string) int64 {
	e.t.Helper()
	return e.submit(spec(target, command, prereqs...))[0]
}

func (e *env) register(site string) int64 {
	e.t.Helper()
	r, err := e.s.Register(context.Background(), protocol.Register{Site: site, Host: "h-" + site, PID: 42, Slots: 4, OutDir: "/out/" + site})
	if err != nil {
		e.t.Fatalf("Register: %v", err)
	}
	if r.ID <= 0 || r.LeaseS != testLease.Seconds() || r.HeartbeatS <= 0 {
		e.t.Fatalf("RegisterReply = %+v", r)
	}
	return r.ID
}

// next asks for up to free jobs without waiting.
func (e *env) next(ph int64, free int, reports ...protocol.Report) []protocol.Assignment {
	e.t.Helper()
	r, err := e.s.Next(context.Background(), protocol.Next{Placeholder: ph, Free: free, Reports: reports})
	if err != nil {
		e.t.Fatalf("Next: %v", err)
	}
	return r.Jobs
}

// nextAsync asks for one job on ph's behalf, waiting up to a minute (a
// long poll that parks), and delivers what it got on the channel.
func (e *env) nextAsync(ph int64) <-chan []protocol.Assignment {
	done := make(chan []protocol.Assignment, 1)
	go func() {
		r, err := e.s.Next(context.Background(), protocol.Next{Placeholder: ph, Free: 1, WaitMS: 60000})
		if err != nil {
			e.t.Error(err)
		}
		done <- r.Jobs
	}()
	return done
}

func (e *env) nextWalltime(ph int64, free int, walltime float64) []protocol.Assignment {
	e.t.Helper()
	r, err := e.s.Next(context.Background(), protocol.Next{Placeholder: ph, Free: free, WalltimeLeft: walltime})
	if err != nil {
		e.t.Fatalf("Next: %v", err)
	}
	return r.Jobs
}

func ids(as []protocol.Assignment) []int64 {
	var out []int64
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

func (e *env) report(ph int64, rs ...protocol.Report) {
	e.t.Helper()
	if err := e.s.Report(context.Background(), ph, rs); err != nil {
		e.t.Fatalf("Report: %v", err)
	}
}

func ok(a protocol.Assignment) protocol.Report {
	return protocol.Report{ID: a.ID, Attempt: a.Attempt, Exit: 0}
}

func exit(a protocol.Assignment, code int) protocol.Report {
	return protocol.Report{ID: a.ID, Attempt: a.Attempt, Exit: code}
}

func (e *env) job(id int64) protocol.JobDetail {
	e.t.Helper()
	d, err := e.s.Inspect().Job(context.Background(), id)
	if err != nil {
		e.t.Fatalf("Job(%d): %v", id, err)
	}
	return d
}

func (e *env) state(id int64) job.State {
	e.t.Helper()
	return job.State(e.job(id).State[0])
}

func (e *env) mustBe(id int64, want job.State) {
	e.t.Helper()
	if got := e.state(id); got != want {
		e.t.Fatalf("job %d is %s, want %s", id, got, want)
	}
}

// expireLeases moves the clock past the lease, as for a CLS that runs
// meanwhile (advance), and checks that job id has left Executing.
func (e *env) expireLeases(id int64) {
	e.t.Helper()
	e.advance(testLease + time.Second)
	if e.state(id) == job.Executing {
		e.t.Fatalf("job %d still executing after its lease ran out", id)
	}
}

// advance moves the clock on by d as it passes for a CLS that runs: in
// steps of a quarter lease, each seen by the core's lease check (tick). One
// jump longer than half a lease would be the CLS's own stall (see
// placeholders.Registry.NoticeStall), which renews leases instead of expiring them.
func (e *env) advance(d time.Duration) {
	e.t.Helper()
	for d > 0 {
		step := min(d, testLease/4)
		e.clock.Advance(step)
		d -= step
		e.tick()
	}
}

// tick runs the core's lease check now, as its ticker does.
//
// The ledger's check runs as if due: a submission does not make it due
// (it runs at its pace), and on a busy machine the core's own tick may
// have run it between a test's queue settings and its jobs.
func (e *env) tick() {
	e.t.Helper()
	if err := e.s.do(context.Background(), func() error { e.s.ledger.Changed(); return e.s.expire() }); err != nil {
		e.t.Fatalf("expire: %v", err)
	}
}

func (e *env) summary() map[string]map[string]int {
	e.t.Helper()
	qs, err := e.s.Summary(context.Background())
	if err != nil {
		e.t.Fatalf("Summary: %v", err)
	}
	out := map[string]map[string]int{}
	for _, q := range qs {
		out[q.Queue] = q.Counts
	}
	return out
}

func (e *env) stat(st protocol.Stat) []protocol.JobInfo {
	e.t.Helper()
	var out []protocol.JobInfo
	err := e.s.Inspect().Stat(context.Background(), st, 0, func(js []protocol.JobInfo) error {
		out = append(out, js...)
		return nil
	})
	if err != nil {
		e.t.Fatalf("Stat(%+v): %v", st, err)
	}
	return out
}

// check verifies, on the core, that memory and storage agree: every job's
// stored state matches the graph, pending states follow the dependency
// rules computed from storage, Summary counts match storage, every Queued
// job is in its queue's ready heap and every Executing one has a lease.
func (e *env) check() {
	e.t.Helper()
	err := e.s.do(context.Background(), func() error {
		ctx := context.Background()
		type jr struct {
			queue, target int32
			state         job.State
		}
		all := map[int64]jr{}
		rows, err := e.s.w.QueryContext(ctx, "SELECT id, queue_id, target_id, state FROM jobs")
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			var r jr
			var st string
			if err := rows.Scan(&id, &r.queue, &r.target, &st); err != nil {
				rows.Close()
				return err
			}
			r.state = job.State(st[0])
			all[id] = r
		}
		if err := closeRows(rows); err != nil {
			return err
		}
		prereqs, afterAny := map[int64][]int32{}, map[int64][]int32{}
		rows, err = e.s.w.QueryContext(ctx, "SELECT job_id, target_id, kind FROM job_prereqs")
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			var t, kind int32
			if err := rows.Scan(&id, &t, &kind); err != nil {
				rows.Close()
				return err
			}
			if kind == prereqAfterAny {
				afterAny[id] = append(afterAny[id], t)
				continue
			}
			prereqs[id] = append(prereqs[id], t)
		}
		if err := closeRows(rows); err != nil {
			return err
		}
		// Every target jobs name, as job or prerequisite, is stored under
		// the id the graph has for it.
		targets := map[int32]string{}
		rows, err = e.s.w.QueryContext(ctx, "SELECT id, name FROM targets")
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int32
			var name string
			if err := rows.Scan(&id, &name); err != nil {
				rows.Close()
				return err
			}
			targets[id] = name
		}
		if err := closeRows(rows); err != nil {
			return err
		}
		var terrs []string
		for tid, name := range targets {
			if got, ok := e.s.g.Lookup(name); !ok || int32(got) != tid {
				terrs = append(terrs, fmt.Sprintf("target %q stored as %d, graph has %d %v", name, tid, got, ok))
			}
		}
		for id, r := range all {
			if _, ok := targets[r.target]; !ok {
				terrs = append(terrs, fmt.Sprintf("job %d names target %d, which is not stored", id, r.target))
			}
			for _, p := range slices.Concat(prereqs[id], afterAny[id]) {
				if _, ok := targets[p]; !ok {
					terrs = append(terrs, fmt.Sprintf("job %d waits on target %d, which is not stored", id, p))
				}
			}
		}
		if len(terrs) > 0 {
			return fmt.Errorf("targets table: %s", strings.Join(terrs, "; "))
		}
		total, done, bad := map[int32]int{}, map[int32]int{}, map[int32]int{}
		counts, byTarget, byTargetQueue := map[int32]*[128]int{}, map[int32][128]int{}, map[[2]int32][128]int{}
		for _, r := range all {
			c := byTarget[r.target]
			c[r.state]++
			byTarget[r.target] = c
			c = byTargetQueue[[2]int32{r.target, r.queue}]
			c[r.state]++
			byTargetQueue[[2]int32{r.target, r.queue}] = c
			total[r.target]++
			if r.state == job.Done {
				done[r.target]++
			}
			if r.state.Bad() {
				bad[r.target]++
			}
			if counts[r.queue] == nil {
				counts[r.queue] = new([128]int)
			}
			counts[r.queue][r.state]++
		}
		if err := e.addPurged(total, done, bad); err != nil {
			return err
		}
		var errs []string
		for id, r := range all {
			gj, live := e.s.g.Node(id)
			if r.state.Terminal() {
				if live {
					errs = append(errs, fmt.Sprintf("job %d stored %s but live in memory as %s", id, r.state, gj.State))
				}
				continue
			}
			if !live || gj.State != r.state {
				errs = append(errs, fmt.Sprintf("job %d stored %s, memory %v %s", id, r.state, live, gj.State))
				continue
			}
			if r.state.Pending() {
				want := job.Queued
				for _, p := range prereqs[id] {
					if bad[p] > 0 {
						want = job.Blocked
						break
					}
					if total[p] == 0 || done[p] != total[p] {
						want = job.Waiting
					}
				}
				for _, p := range afterAny[id] {
					if want != job.Blocked && (total[p] == 0 || done[p]+bad[p] != total[p]) {
						want = job.Waiting
					}
				}
				if want != r.state {
					errs = append(errs, fmt.Sprintf("job %d is %s but its prerequisites make it %s", id, r.state, want))
				}
			}
			if r.state == job.Queued {
				q := e.s.queueIDs[r.queue]
				if items := heapItems(q); !slices.Contains(items, id) {
					errs = append(errs, fmt.Sprintf("queued job %d is not in queue %s's ready heap %v", id, q.Name, items))
				}
			}
			if r.state == job.Executing && e.s.running[id] == nil {
				errs = append(errs, fmt.Sprintf("executing job %d has no lease", id))
			}
		}
		for id := range e.s.running {
			if all[id].state != job.Executing {
				errs = append(errs, fmt.Sprintf("job %d has a lease but is %s", id, all[id].state))
			}
		}
		for q, c := range e.s.counts {
			for _, st := range job.States {
				want := 0
				if counts[q] != nil {
					want = counts[q][st]
				}
				if c[st] != want {
					errs = append(errs, fmt.Sprintf("queue %d: %d jobs counted %s, storage has %d", q, c[st], st, want))
				}
			}
		}
		// The jobs kept in each state (bystate) are storage's.
		byState := map[job.State][]int64{}
		for id, r := range all {
			byState[r.state] = append(byState[r.state], id)
		}
		for _, st := range job.States {
			want := byState[st]
			slices.Sort(want)
			got, in, _ := e.s.states.Page([]job.State{st}, 0, 0)
			if !slices.Equal(got, want) || in != len(want) {
				errs = append(errs, fmt.Sprintf("jobs kept in state %s: %v (%d), storage has %v", st, got, in, want))
			}
		}
		// Every stored job is in its queue's runs of ids (bystate).
		for id, r := range all {
			runs, ok := e.s.states.QueueRuns(r.queue)
			if i, _ := slices.BinarySearchFunc(runs, id, func(run [2]int64, id int64) int { return cmp.Compare(run[1], id) }); ok && (i == len(runs) || id < runs[i][0]) {
				errs = append(errs, fmt.Sprintf("job %d of queue %d is outside its runs %v", id, r.queue, runs))
			}
		}
		// Every target's jobs by state (bystate) are storage's.
		for tid := range targets {
			if got := e.s.states.Target(dag.TargetID(tid)); got != byTarget[tid] {
				errs = append(errs, fmt.Sprintf("target %d: jobs kept by state %v, storage has %v", tid, stateCounts(got), stateCounts(byTarget[tid])))
			}
			for q := range e.s.queueIDs {
				want := byTargetQueue[[2]int32{tid, q}]
				if got, ok := e.s.states.TargetIn(dag.TargetID(tid), q); ok && got != want {
					errs = append(errs, fmt.Sprintf("target %d in queue %d: jobs kept by state %v, storage has %v", tid, q, stateCounts(got), stateCounts(want)))
				}
			}
		}
		for q, c := range counts {
			if e.s.counts[q] == nil {
				errs = append(errs, fmt.Sprintf("queue %d has jobs %v but no counts", q, c[:]))
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("inconsistent metaqueue:\n%s", strings.Join(errs, "\n"))
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// stateCounts shows counts by state letter, those not 0.
func stateCounts(c [128]int) map[string]int {
	m := map[string]int{}
	for st, n := range c {
		if n != 0 {
			m[string(rune(st))] = n
		}
	}
	return m
}

// heapItems lists the ids in a queue's ready heap without disturbing it.
func heapItems(q *queue) []int64 {
	var saved []policy.Ready
	for {
		r, ok := q.ready.Pop()
		if !ok {
			break
		}
		saved = append(saved, r)
	}
	var out []int64
	for _, r := range saved {
		q.ready.Push(r)
		out = append(out, r.ID)
	}
	return out
}

// integrity runs SQLite's integrity check on the store's file through a
// separate connection.
func integrity(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatal(err)
	}
	if res != "ok" {
		t.Fatalf("integrity_check: %s", res)
	}
}

func errCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	if !protocol.IsCode(err, code) {
		t.Fatalf("error %v (%T) is not %s", err, err, code)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %q is not one line", err)
	}
}

// openRaw opens the store's file directly (the store must be closed, or
// only read).
// downgrade closes the store, runs stmts on its database directly (to make
// it what an older version left) and opens the store again.
func (e *env) downgrade(stmts ...string) {
	e.t.Helper()
	e.s.Close()
	e.s = nil
	db := openRaw(e.t, e.opt.Path)
	for _, q := range stmts {
		mustExec(e.t, db, q)
	}
	db.Close()
	e.open()
}

func openRaw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// parkedAtLeast waits until the core holds at least n parked Next calls
// and w waits.
func (e *env) parkedAtLeast(n, w int) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var np, nw int
		if err := e.s.do(context.Background(), func() error {
			np = len(e.s.parked)
			nw = e.s.waits.Len()
			return nil
		}); err != nil {
			e.t.Fatal(err)
		}
		if np >= n && nw >= w {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d parked calls and %d waits, want %d and %d", np, nw, n, w)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
