package metaqueue

import (
	"context"
	"strconv"
	"strings"
	"testing"

	mqcopies "github.com/mq-hpc/mq/internal/metaqueue/copies"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// setQueue makes queue name use policy pol with at most copies attempts
// of a job at once (-1: leave the default).
func (e *env) setQueue(name, pol string, copies int) {
	e.t.Helper()
	qs := protocol.QueueSet{Name: name, Policy: &pol}
	if copies >= 0 {
		qs.MaxCopies = &copies
	}
	if _, err := e.s.SetQueue(context.Background(), qs); err != nil {
		e.t.Fatalf("SetQueue: %v", err)
	}
}

func (e *env) heartbeat(ph int64, running []protocol.JobRef, claim ...protocol.JobRef) protocol.HeartbeatReply {
	e.t.Helper()
	r, err := e.s.Heartbeat(context.Background(), protocol.Heartbeat{Placeholder: ph, Running: running, Claim: claim})
	if err != nil {
		e.t.Fatalf("Heartbeat: %v", err)
	}
	return r
}

func refOf(a protocol.Assignment) protocol.JobRef {
	return protocol.JobRef{ID: a.ID, Attempt: a.Attempt}
}

func contains(refs []protocol.JobRef, r protocol.JobRef) bool {
	for _, x := range refs {
		if x == r {
			return true
		}
	}
	return false
}

// killedCopies counts a job's attempts recorded as killed for a winner.
func (e *env) killedCopies(id int64) int {
	e.t.Helper()
	var n int
	if err := e.s.rdb.QueryRow("SELECT count(*) FROM attempts WHERE job_id = ? AND killed_copy = 1", id).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// replicaRace submits one job to queue b (policy wqr, default copies),
// registers n placeholders at sites s1..sn, and has the first asking of
// them ask for one job each: the first gets the job, the others copies of
// it. It returns the job, the placeholders and the attempts, in order.
func (e *env) replicaRace(n, asking int) (id int64, phs []int64, as []protocol.Assignment) {
	e.t.Helper()
	e.setQueue("b", "wqr", -1)
	id = e.submit(protocol.JobSpec{Queue: "b", Target: "t", Command: "true", Cwd: "/w"})[0]
	for i := range n {
		phs = append(phs, e.register("s"+itoa(i+1)))
	}
	for _, ph := range phs[:asking] {
		got := e.next(ph, 1)
		if len(got) != 1 || got[0].ID != id {
			e.t.Fatalf("placeholder %d got %+v, want an attempt of job %d", ph, got, id)
		}
		as = append(as, got[0])
	}
	return id, phs, as
}

// noCopy asks for one job on ph's behalf and fails with msg if it gets
// any.
func (e *env) noCopy(ph int64, msg string) {
	e.t.Helper()
	if c := e.next(ph, 1); len(c) != 0 {
		e.t.Fatalf("%s: %+v", msg, c)
	}
}

// noCopyAcrossRestart checks that ph, at site, gets no copy (msg says what
// was copied otherwise), restarts the CLS, and checks the same of a
// placeholder registered again at site, which it returns.
func (e *env) noCopyAcrossRestart(ph int64, site, msg string) int64 {
	e.t.Helper()
	e.noCopy(ph, msg)
	e.reopen()
	ph = e.register(site)
	e.noCopy(ph, "after a restart "+msg)
	return ph
}

// killedAtHeartbeat sends ph's heartbeat with attempt a running and fails
// with msg unless the reply kills a (kill true) or kills nothing (false).
func (e *env) killedAtHeartbeat(ph int64, a protocol.Assignment, kill bool, msg string) {
	e.t.Helper()
	r := e.heartbeat(ph, []protocol.JobRef{refOf(a)})
	if kill && !contains(r.Kill, refOf(a)) || !kill && len(r.Kill) != 0 {
		e.t.Fatalf("%s: %+v", msg, r)
	}
}

// TestReplicaRace: an idle placeholder gets a copy of the running job of
// a queue that copies (never one of a queue that does not, never beyond
// the cap, never to the placeholder running it); the first attempt to
// finish wins, the job ends Done once with the winner's attempt, and the
// losers are killed at their next heartbeat and recorded as killed copies.
func TestReplicaRace(t *testing.T) {
	for _, tc := range []struct {
		policy string
		copies int // queue's max copies (-1: default)
		want   int // copies an idle placeholder may get (of 2 asking)
		apart  bool
	}{
		{"fcfs", -1, 0, false},
		{"fcfs", 2, 1, true},
		{"wqr", -1, 2, true},
		{"wqr", 1, 0, false},
		{"wqr", 2, 1, true}, // the cap: two asking, one copy
		{"sjf", 2, 1, true}, // an opt-in straggler remedy for sjf too
		{"sa", -1, 0, true}, // SA copies only jobs with input bytes at the asking site
		{"xsufferage", -1, 0, false},
	} {
		t.Run(tc.policy+"/"+strconv.Itoa(tc.copies), func(t *testing.T) {
			e := newEnv(t)
			e.setQueue("b", tc.policy, tc.copies)
			id := e.submit(protocol.JobSpec{Queue: "b", Target: "t", Command: "true", Cwd: "/w"})[0]
			ph1, ph2, ph3 := e.register("s1"), e.register("s2"), e.register("s3")
			first := e.next(ph1, 1)
			if len(first) != 1 || first[0].ID != id {
				t.Fatalf("first placeholder got %+v", first)
			}
			if first[0].Scratch != tc.apart {
				t.Fatalf("Scratch = %v, want %v (the job may be copied)", first[0].Scratch, tc.apart)
			}
			e.noCopy(ph1, "the placeholder running the job got a copy")
			var copies []protocol.Assignment
			for _, ph := range []int64{ph2, ph3} {
				copies = append(copies, e.next(ph, 1)...)
			}
			if len(copies) != tc.want {
				t.Fatalf("%d copies, want %d: %+v", len(copies), tc.want, copies)
			}
			if tc.want == 0 {
				return
			}
			for i, c := range copies {
				if c.ID != id || c.Attempt != 2+i || !c.Scratch || c.Command != "true" {
					t.Fatalf("copy %d = %+v", i, c)
				}
			}
			// The last copy finishes first.
			win := copies[len(copies)-1]
			winPH := []int64{ph2, ph3}[len(copies)-1]
			e.report(winPH, ok(win))
			e.mustBe(id, job.Done)
			d := e.job(id)
			if d.Placeholder != winPH || !strings.Contains(d.Stdout, "."+itoa(win.Attempt)+".") {
				t.Fatalf("job row describes placeholder %d, stdout %s; want the winner's (%d, attempt %d)", d.Placeholder, d.Stdout, winPH, win.Attempt)
			}
			e.killedAtHeartbeat(ph1, first[0], true, "the original was not killed")
			if n := e.killedCopies(id); n != len(copies) {
				t.Fatalf("%d killed copies recorded, want %d", n, len(copies))
			}
			// A loser's late report changes nothing but its CPU figures.
			late := ok(first[0])
			late.Usage = protocol.Usage{CPUUser: 2, CPUSys: 1, MaxRSS: 1 << 20}
			e.report(ph1, late)
			e.mustBe(id, job.Done)
			w, err := mqcopies.Waste(context.Background(), e.s.ReadDB())
			if err != nil || w == nil || w.Killed != len(copies) || w.CPUSeconds != 3 {
				t.Fatalf("Waste = %+v, %v", w, err)
			}
			e.check()
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestReplicaClaim: the first attempt to claim wins, is told so, and may
// report Done; a later claim is told to kill its attempt.
func TestReplicaClaim(t *testing.T) {
	e := newEnv(t)
	id, phs, as := e.replicaRace(2, 2)
	ph1, ph2, a1, a2 := phs[0], phs[1], as[0], as[1]
	r := e.heartbeat(ph1, []protocol.JobRef{refOf(a1)}, refOf(a1))
	if !contains(r.Won, refOf(a1)) || contains(r.Kill, refOf(a1)) {
		t.Fatalf("first claim: %+v", r)
	}
	r = e.heartbeat(ph2, []protocol.JobRef{refOf(a2)}, refOf(a2))
	if contains(r.Won, refOf(a2)) || !contains(r.Kill, refOf(a2)) {
		t.Fatalf("second claim: %+v", r)
	}
	// The loser's success report after losing is ignored.
	e.report(ph2, ok(a2))
	e.mustBe(id, job.Executing)
	e.report(ph1, ok(a1))
	e.mustBe(id, job.Done)
	if d := e.job(id); d.Placeholder != ph1 {
		t.Fatalf("job row describes placeholder %d, want %d", d.Placeholder, ph1)
	}
	if n := e.killedCopies(id); n != 1 {
		t.Fatalf("%d killed copies, want 1", n)
	}
}

// TestReplicaFailsAlone: an attempt that fails or is lost while another
// copy runs ends alone; the job follows the last copy standing, and a
// CLS restarted mid-race keeps every copy and still ends the job once.
func TestReplicaFailsAlone(t *testing.T) {
	e := newEnv(t)
	id, phs, as := e.replicaRace(3, 3)
	ph1, ph2, ph3, a1, a2, a3 := phs[0], phs[1], phs[2], as[0], as[1], as[2]
	e.report(ph1, exit(a1, 3)) // the original fails: a copy takes the row
	e.mustBe(id, job.Executing)
	e.reopen() // the CLS restarts mid-race
	e.killedAtHeartbeat(ph2, a2, false, "a copy was killed after the restart")
	e.killedAtHeartbeat(ph3, a3, false, "a copy was killed after the restart")
	e.report(ph3, ok(a3))
	e.mustBe(id, job.Done)
	e.report(ph2, ok(a2)) // too late
	d := e.job(id)
	if d.Placeholder != ph3 || d.State != string(job.Done) {
		t.Fatalf("job = %+v", d.JobInfo)
	}
	if n := e.killedCopies(id); n != 1 {
		t.Fatalf("%d killed copies, want 1 (the failed one is not)", n)
	}
	if len(d.History) != 2 {
		t.Fatalf("history = %+v, want the failed and the killed attempt", d.History)
	}
	e.check()
}

// TestReplicaOptOut: a job submitted with NoReplicate never runs twice at
// once, and neither does a job declaring an output outside its working
// directory; another job of the queue still may.
func TestReplicaOptOut(t *testing.T) {
	e := newEnv(t)
	e.setQueue("b", "wqr", -1)
	size := int64(1)
	e.submit(
		protocol.JobSpec{Queue: "b", Target: "t", Command: "true", Cwd: "/w", NoReplicate: true},
		protocol.JobSpec{Queue: "b", Target: "u", Command: "true", Cwd: "/w", Outputs: []protocol.File{{Path: "/elsewhere/o", Size: &size, Rel: true}}},
	)
	ph1, ph2 := e.register("s1"), e.register("s2")
	as := e.next(ph1, 2)
	if len(as) != 2 || as[0].Scratch || as[1].Scratch {
		t.Fatalf("got %+v", as)
	}
	ph2 = e.noCopyAcrossRestart(ph2, "s2", "an opted-out job was copied") // the opt-out is stored
	id3 := e.submit(protocol.JobSpec{Queue: "b", Target: "v", Command: "true", Cwd: "/w", Outputs: []protocol.File{{Path: "/w/out", Size: &size, Rel: true}}})[0]
	ph3 := e.register("s3")
	a3 := e.next(ph3, 1)
	if len(a3) != 1 || a3[0].ID != id3 || !a3[0].Scratch {
		t.Fatalf("got %+v", a3)
	}
	if c := e.next(ph2, 1); len(c) != 1 || c[0].ID != id3 {
		t.Fatalf("the job that may be copied was not: %+v", c)
	}
}

// TestReplicaDeleteStopsCopies: mqdel of a racing job kills every attempt.
func TestReplicaDeleteStopsCopies(t *testing.T) {
	e := newEnv(t)
	id, phs, as := e.replicaRace(2, 2)
	if _, err := e.s.Delete(context.Background(), protocol.Select{IDs: []int64{id}}); err != nil {
		t.Fatal(err)
	}
	for i, a := range as {
		e.killedAtHeartbeat(phs[i], a, true, "attempt "+itoa(a.Attempt)+" not killed")
	}
	e.reopen()
	if _, err := e.s.Register(context.Background(), protocol.Register{ID: phs[1], Site: "s2", Host: "h-s2", PID: 42, Slots: 4}); err != nil {
		t.Fatal(err)
	}
	e.killedAtHeartbeat(phs[1], as[1], true, "copy revived by a restart")
}

// TestReplicaStorageAffinity: an sa queue copies a running job only for a
// placeholder at a site holding some of its input bytes.
func TestReplicaStorageAffinity(t *testing.T) {
	e := newEnv(t)
	e.setQueue("b", "sa", -1)
	size := int64(1000)
	mk := e.submit(protocol.JobSpec{Queue: "b", Target: "mk", Command: "true", Cwd: "/w", Outputs: []protocol.File{{Path: "/w/in", Size: &size, Rel: true}}})[0]
	near1, near2, far := e.register("near"), e.register("near"), e.register("far")
	a := e.next(near1, 1)
	if len(a) != 1 || a[0].ID != mk {
		t.Fatalf("got %+v", a)
	}
	e.report(near1, ok(a[0]))
	id := e.submit(protocol.JobSpec{Queue: "b", Target: "use", Command: "true", Cwd: "/w", Prereqs: []string{"mk"},
		Inputs: []protocol.File{{Path: "/w/in", Size: &size, Rel: true}}})[0]
	if a = e.next(near1, 1); len(a) != 1 || a[0].ID != id {
		t.Fatalf("got %+v", a)
	}
	e.noCopy(far, "a placeholder with none of the inputs got a copy")
	c := e.next(near2, 1)
	if len(c) != 1 || c[0].ID != id || !c[0].Scratch {
		t.Fatalf("a placeholder at the inputs' site got %+v, want a copy", c)
	}
	e.report(near2, ok(c[0]))
	e.mustBe(id, job.Done)
}

// TestReplicaOnlyBesideScratch: a job dispatched while its queue did not
// copy runs in its working directory, not in a scratch directory of its
// own; if the queue starts copying, it must not get a copy (a losing
// original would write its outputs over the winner's), also after a
// restart. A job dispatched once the queue copies may be copied.
func TestReplicaOnlyBesideScratch(t *testing.T) {
	e := newEnv(t)
	e.setQueue("b", "fcfs", -1)
	id := e.submit(protocol.JobSpec{Queue: "b", Target: "t", Command: "true", Cwd: "/w"})[0]
	ph1, ph2 := e.register("s1"), e.register("s2")
	a := e.next(ph1, 1)
	if len(a) != 1 || a[0].ID != id || a[0].Scratch {
		t.Fatalf("got %+v, want job %d in its working directory", a, id)
	}
	e.setQueue("b", "wqr", -1)
	ph2 = e.noCopyAcrossRestart(ph2, "s2", "a job running outside scratch was copied")
	id2 := e.submit(protocol.JobSpec{Queue: "b", Target: "u", Command: "true", Cwd: "/w"})[0]
	ph3 := e.register("s3")
	if a := e.next(ph3, 1); len(a) != 1 || a[0].ID != id2 || !a[0].Scratch {
		t.Fatalf("got %+v, want job %d in scratch", a, id2)
	}
	e.reopen()
	ph2 = e.register("s2")
	if c := e.next(ph2, 1); len(c) != 1 || c[0].ID != id2 || !c[0].Scratch {
		t.Fatalf("after a restart the job running in scratch was not copied: %+v", c)
	}
}

// TestReplicaNoCopyAfterClaim: once an attempt has claimed the win it
// moves its outputs into place; no new copy may start beside it (one that
// claimed later would win again and move its own files over them), also
// after a restart.
func TestReplicaNoCopyAfterClaim(t *testing.T) {
	e := newEnv(t)
	id, phs, as := e.replicaRace(3, 2)
	ph1, ph2, ph3, a2 := phs[0], phs[1], phs[2], as[1]
	if r := e.heartbeat(ph2, []protocol.JobRef{refOf(a2)}, refOf(a2)); !contains(r.Won, refOf(a2)) {
		t.Fatalf("claim: %+v", r)
	}
	e.noCopy(ph3, "a copy started beside a claimed winner")
	e.noCopy(ph1, "the killed original's placeholder got a copy of the claimed winner")
	e.reopen()
	ph3 = e.register("s3")
	e.noCopy(ph3, "after a restart a copy started beside a claimed winner")
	e.register("s2")
	e.report(ph2, ok(a2))
	e.mustBe(id, job.Done)
	if d := e.job(id); d.Placeholder != ph2 || d.Attempts != a2.Attempt {
		t.Fatalf("job row describes placeholder %d attempt %d, want the claimed winner", d.Placeholder, d.Attempts)
	}
	e.check()
}

// TestReplicaOptOutJobFile: "no_replicate": true in a job file (mqsub -f,
// parsed by protocol.ReadJobFile and spooled through a bulk submission)
// opts the job out as --no-replicate does; its neighbour without the key
// is copied.
func TestReplicaOptOutJobFile(t *testing.T) {
	e := newEnv(t)
	e.setQueue("b", "wqr", 2) // one copy a job: a third placeholder could copy only the opted-out one
	file := `{"queue": "b", "target": "t", "command": "true", "no_replicate": true}
{"queue": "b", "target": "u", "command": "true"}
`
	var specs []protocol.JobSpec
	if err := protocol.ReadJobFile(strings.NewReader(file), protocol.JobSpec{Cwd: "/w"}, func(_ int, js protocol.JobSpec) error {
		specs = append(specs, js)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || !specs[0].NoReplicate || specs[1].NoReplicate {
		t.Fatalf("parsed %+v", specs)
	}
	bulk, err := e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	if err := bulk.Add(1, specs); err != nil {
		t.Fatal(err)
	}
	first, err := bulk.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ph1, ph2 := e.register("s1"), e.register("s2")
	as := e.next(ph1, 2)
	if len(as) != 2 || as[0].ID != first || as[0].Scratch || !as[1].Scratch {
		t.Fatalf("got %+v; want job %d outside scratch, its neighbour in scratch", as, first)
	}
	if c := e.next(ph2, 1); len(c) != 1 || c[0].ID != first+1 {
		t.Fatalf("got %+v, want a copy of job %d (never of %d, which opted out)", c, first+1, first)
	}
	e.noCopy(e.register("s3"), "the job that opted out in its job file was copied")
}

// TestReplicaNoCopyAfterFailure: once an attempt of a job fails by itself
// while another runs on, no new copy of the job starts (a failing command
// was copied again and again by idle placeholders, 362 attempts of one
// job in a second); the attempt left decides, and the job run again may
// be copied again.
func TestReplicaNoCopyAfterFailure(t *testing.T) {
	e := newEnv(t)
	id, phs, as := e.replicaRace(3, 2)
	ph1, ph2, ph3, a1, a2 := phs[0], phs[1], phs[2], as[0], as[1]
	e.report(ph1, exit(a1, 127)) // the original fails; its copy runs on
	e.mustBe(id, job.Executing)
	e.noCopy(ph1, "the failed attempt's placeholder got a copy of the job")
	e.noCopy(ph3, "an idle placeholder got a copy of a job whose copy failed")
	e.report(ph2, exit(a2, 127)) // the last attempt fails: so does the job
	e.mustBe(id, job.Failed)
	if _, err := e.s.Rerun(context.Background(), protocol.Select{IDs: []int64{id}}); err != nil {
		t.Fatal(err)
	}
	if got := e.next(ph1, 1); len(got) != 1 || got[0].ID != id {
		t.Fatalf("the job run again: placeholder %d got %+v", ph1, got)
	}
	if got := e.next(ph3, 1); len(got) != 1 || got[0].ID != id {
		t.Fatalf("the job run again was not copied: placeholder %d got %+v", ph3, got)
	}
	e.check()
}
