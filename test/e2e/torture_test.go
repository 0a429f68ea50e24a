//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// TestCLSCrashTorture SIGKILLs the CLS at random moments of a mixed
// workload (chains, fan-ins, a job array with a %limit, a bundle submitted
// with a token, jobs asking for cores and memory, jobs failing in a queue
// that retries and one that does not, held jobs) while mqdel, mqhold,
// mqrls, cls purge and the bundle's submit race the kill. After each crash
// it checks the database as the crash left it, then restarts the CLS
// without placeholders and checks that nothing acknowledged was lost: every
// job listed once, acknowledged holds and deletes in force and never
// followed by a new attempt, no job done before its prerequisites, the
// summary equal to the listing, done jobs' output whole. At the end, with
// the work drained, every job has ended as its prerequisites say, the
// array never ran more members at once than its limit, and the database
// passes PRAGMA integrity_check.
//
// MQ_TORTURE_SEED replays a run (the seed is logged); MQ_TORTURE_ROUNDS
// sets the number of crashes (default 8).
func TestCLSCrashTorture(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("MQ_TORTURE_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("MQ_TORTURE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	rounds := 8
	if s := os.Getenv("MQ_TORTURE_ROUNDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("MQ_TORTURE_ROUNDS=%q: want a positive number", s)
		}
		rounds = v
	}
	t.Logf("seed %d (replay with MQ_TORTURE_SEED=%d), %d crashes", seed, seed, rounds)
	start := time.Now()

	tt := newTorture(t, seed)
	tt.h.startCLS(tt.serveArgs...)
	tt.h.ok("cls", "queue", "set", "default", "--max-attempts", "30")
	tt.h.ok("cls", "queue", "set", "retry", "--retry-failed", "--max-attempts", "30")
	tt.h.ok("cls", "queue", "set", "noretry", "--max-attempts", "30")
	for r := 0; r < rounds; r++ {
		tt.round(r)
	}

	// Drain: release every job still held, wait for every job to end.
	tt.h.run("mqrls", "--all", "-Q") // exit 1 when none is held
	clear(tt.held)
	waitFor(t, 3*time.Minute, func() error {
		live := 0
		for _, j := range tt.h.jobs("-s", allStates) {
			if !strings.Contains("DFXB", j.State) {
				live++
			}
		}
		if live > 0 {
			return fmt.Errorf("%d jobs not ended", live)
		}
		return nil
	})
	tt.check("end", true)
	tt.catSome(10)
	tt.checkArrays()
	tt.h.stopCLS(syscall.SIGTERM, time.Minute)
	tt.integrity("after a clean stop")
	t.Logf("%d jobs (%d purged), %d deletes and %d holds acknowledged, %d actions of unknown outcome, %d crashes, %v",
		len(tt.jobs), len(tt.gone), len(tt.deleted), tt.holds, len(tt.unsure), rounds, time.Since(start).Round(time.Second))
}

// allStates lists jobs in every state, held and prefetched too.
const allStates = "WQHPEDFBX"

// tJob is a job the torture submitted and was told the id of.
type tJob struct {
	id      int64
	target  string
	prereqs []string
	fails   bool // its command always exits 3
}

// tAction is what became of a user's command raced against a kill.
type tAction struct {
	what  string // mqdel, mqhold, mqrls, purge, bundle
	arg   string // purge: the target; bundle: the token
	ids   []int64
	pause time.Duration // before it is sent
	r     result
	acked bool
	// purge: the jobs ended before it was sent; bundle: its reply.
	before []int64
	reply  []int64
}

type torture struct {
	t         *testing.T
	h         *harness
	rng       *rand.Rand
	seed      int64
	marks     string // MARKS/ID.ATTEMPT: made by each attempt as it starts
	serveArgs []string

	jobs     map[int64]*tJob
	order    []int64
	holds    int            // holds acknowledged
	held     map[int64]int  // hold acknowledged, not released: attempts then (-1: not read yet)
	deleted  map[int64]int  // delete acknowledged: attempts then (-1: not read yet)
	unsure   map[int64]bool // a hold, release or delete of unknown outcome
	purgeOK  map[string]bool
	mustGone map[int64]bool // ended before an acknowledged purge of its target
	gone     map[int64]bool
	arrays   [][]int64
	limit    int
	bundles  map[string][]string // token -> targets
	spec     map[string][]protocol.JobSpec
	live     map[int][]int64 // per round: jobs user actions pick from
}

func newTorture(t *testing.T, seed int64) *torture {
	h := newHarness(t)
	tt := &torture{
		t: t, h: h, seed: seed,
		rng:       rand.New(rand.NewPCG(uint64(seed), 0x70c7)),
		marks:     filepath.Join(h.dir, "marks"),
		serveArgs: []string{"--local", "3", "--slots", "2", "--lease", "3s"},
		jobs:      map[int64]*tJob{},
		held:      map[int64]int{}, deleted: map[int64]int{}, unsure: map[int64]bool{},
		purgeOK: map[string]bool{}, mustGone: map[int64]bool{}, gone: map[int64]bool{},
		limit: 2, bundles: map[string][]string{}, spec: map[string][]protocol.JobSpec{},
		live: map[int][]int64{},
	}
	if err := os.Mkdir(tt.marks, 0o755); err != nil {
		t.Fatal(err)
	}
	return tt
}

// cmd is a job's command: it marks its attempt, sleeps, and writes a line
// naming its target and id.
func (tt *torture) cmd() string {
	return fmt.Sprintf(`%s; sleep 0.%02d; echo "out $MQ_TARGET $MQ_JOB_ID"`, tt.mark(), 5+tt.rng.IntN(30))
}

// mark is the start of every job's command: a line in MARKS/ID.ATTEMPT.
func (tt *torture) mark() string {
	return fmt.Sprintf(`echo $$ >> %s/$MQ_JOB_ID.$MQ_ATTEMPT`, tt.marks)
}

func (tt *torture) add(id int64, target string, prereqs []string, fails bool) {
	if tt.jobs[id] != nil {
		tt.t.Fatalf("job id %d given twice (%s, then %s)", id, tt.jobs[id].target, target)
	}
	tt.jobs[id] = &tJob{id: id, target: target, prereqs: prereqs, fails: fails}
	tt.order = append(tt.order, id)
}

// submit adds round r's workload; the jobs user actions may pick from go
// in tt.live[r].
func (tt *torture) submit(r int) {
	var lines []protocol.JobSpec
	var fails []bool
	job := func(js protocol.JobSpec, fail bool) {
		if js.Command == "" {
			js.Command = tt.cmd()
		}
		lines = append(lines, js)
		fails = append(fails, fail)
	}
	// First, so that they have ended when the next round purges them.
	for i := 0; i < 4; i++ {
		job(protocol.JobSpec{Target: fmt.Sprintf("pg%d", r), Command: tt.mark() + `; echo "out $MQ_TARGET $MQ_JOB_ID"`}, false)
	}
	chains := 12 + tt.rng.IntN(12)
	var tails []string
	for i := 0; i < chains; i++ {
		for k := 0; k < 3; k++ {
			js := protocol.JobSpec{Target: fmt.Sprintf("c%d_%d_%d", r, i, k)}
			if k > 0 {
				js.Prereqs = []string{fmt.Sprintf("c%d_%d_%d", r, i, k-1)}
			}
			job(js, false)
		}
		tails = append(tails, fmt.Sprintf("c%d_%d_2", r, i))
	}
	job(protocol.JobSpec{Target: fmt.Sprintf("join%d", r), Prereqs: tails}, false)
	for i := 0; i < 8; i++ {
		job(protocol.JobSpec{Target: fmt.Sprintf("fin%d", r)}, false)
	}
	job(protocol.JobSpec{Target: fmt.Sprintf("fout%d", r), Prereqs: []string{fmt.Sprintf("fin%d", r)}}, false)
	var slow []string
	for i := 0; i < 8; i++ {
		slow = append(slow, fmt.Sprintf("slow%d_%d", r, i))
		job(protocol.JobSpec{Target: slow[i], Prereqs: []string{fmt.Sprintf("c%d_%d_1", r, i)}}, false)
	}
	job(protocol.JobSpec{Target: fmt.Sprintf("sdep%d", r), Prereqs: slow}, false)
	for i := 0; i < 3; i++ {
		job(protocol.JobSpec{Target: fmt.Sprintf("res%d", r), Resources: protocol.Resources{CPUs: 2, Mem: 256 << 20}}, false)
	}
	job(protocol.JobSpec{Queue: "noretry", Target: fmt.Sprintf("fail%d", r), Command: tt.mark() + "; exit 3"}, true)
	job(protocol.JobSpec{Target: fmt.Sprintf("blk%d", r), Prereqs: []string{fmt.Sprintf("fail%d", r)}}, false)
	for i := 0; i < 3; i++ {
		job(protocol.JobSpec{Queue: "retry", Target: fmt.Sprintf("flaky%d", r),
			Command: tt.mark() + `; [ "$MQ_ATTEMPT" -gt 1 ] || exit 3; echo "out $MQ_TARGET $MQ_JOB_ID"`}, false)
	}
	for i := 0; i < 2; i++ {
		job(protocol.JobSpec{Target: fmt.Sprintf("hold%d", r), Hold: true}, false)
	}
	job(protocol.JobSpec{Target: fmt.Sprintf("hdep%d", r), Prereqs: []string{fmt.Sprintf("hold%d", r)}}, false)

	var sb strings.Builder
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			tt.t.Fatal(err)
		}
		sb.Write(b)
		sb.WriteByte('\n')
	}
	res := tt.h.runIn(tt.h.dir, strings.NewReader(sb.String()), "mqsub", "-f", "-")
	ids := strings.Fields(res.stdout)
	if res.code != 0 || len(ids) != len(lines) {
		tt.t.Fatalf("mqsub -f - (%d jobs): %s", len(lines), res)
	}
	var pick []int64
	for i, s := range ids {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			tt.t.Fatalf("mqsub -f printed %q", s)
		}
		l := lines[i]
		tt.add(id, l.Target, l.Prereqs, fails[i])
		if l.Hold {
			tt.held[id] = -1
			tt.holds++
		}
		if strings.HasPrefix(l.Target, "slow") || strings.HasPrefix(l.Target, "fin") || strings.HasPrefix(l.Target, "join") || strings.HasSuffix(l.Target, "_1") || strings.HasPrefix(l.Target, "flaky") || strings.HasPrefix(l.Target, "res") {
			pick = append(pick, id)
		}
	}

	// The array, its members at most tt.limit at once.
	target := fmt.Sprintf("arr%d", r)
	res = tt.h.run("mqsub", "--array", fmt.Sprintf("1-8%%%d", tt.limit), target, tt.cmd())
	ids = strings.Fields(res.stdout)
	if res.code != 0 || len(ids) != 8 {
		tt.t.Fatalf("mqsub --array: %s", res)
	}
	var arr []int64
	for _, s := range ids {
		id, _ := strconv.ParseInt(s, 10, 64)
		tt.add(id, target, nil, false)
		arr = append(arr, id)
	}
	tt.arrays = append(tt.arrays, arr)
	pick = append(pick, arr[4:]...)
	tt.live[r] = pick
}

// round submits a workload, races user actions against a SIGKILL of the
// CLS, and checks what the restarted CLS holds.
func (tt *torture) round(r int) {
	t, h := tt.t, tt.h
	tt.submit(r)

	// The bundle this round submits with a token, as a client that must
	// learn what became of it after a crash resends it.
	token := fmt.Sprintf("torture-%d-%d", tt.seed, r)
	var bundle []protocol.JobSpec
	for k := 0; k < 3; k++ {
		tg := fmt.Sprintf("bun%d_%d", r, k)
		bundle = append(bundle, protocol.JobSpec{Target: tg, Command: tt.cmd(), Cwd: h.dir})
		tt.bundles[token] = append(tt.bundles[token], tg)
	}
	tt.spec[token] = bundle

	killAt := time.Duration(200+tt.rng.IntN(2800)) * time.Millisecond
	actions := tt.plan(r, token, killAt)
	done := make(chan []tAction, 1)
	go func() { done <- tt.race(actions) }()
	time.Sleep(killAt)
	h.stopCLS(syscall.SIGKILL, time.Minute)
	acts := <-done
	tt.record(acts)
	tt.integrity(fmt.Sprintf("crash %d", r+1))

	// Check the restarted CLS with no placeholders of its own (the killed
	// one's reconnect to it); then kill it again.
	h.startCLS("--local", "0", "--lease", "3s")
	tt.resubmit(token, acts)
	tt.check(fmt.Sprintf("crash %d", r+1), false)
	h.stopCLS(syscall.SIGKILL, time.Minute)
	h.startCLS(tt.serveArgs...)
	if tt.rng.IntN(3) == 0 { // once more while it takes back its placeholders
		time.Sleep(time.Duration(tt.rng.IntN(300)) * time.Millisecond)
		h.stopCLS(syscall.SIGKILL, time.Minute)
		h.startCLS(tt.serveArgs...)
	}
	t.Logf("crash %d: %d actions: %s", r+1, len(acts), summarize(acts))
}

func summarize(acts []tAction) string {
	var parts []string
	for _, a := range acts {
		s := strings.TrimSpace(a.what + " " + a.arg)
		if a.acked && a.what == "purge" {
			s += fmt.Sprintf(" ok (%d ended before: %s)", len(a.before), strings.TrimSpace(a.r.stdout))
		} else if a.acked {
			s += " ok"
		} else {
			s += fmt.Sprintf(" (exit %d: %s)", a.r.code, strings.TrimSpace(a.r.stderr))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// plan chooses round r's user actions, in a random order, spread over
// about the time until the kill.
func (tt *torture) plan(r int, token string, killAt time.Duration) []tAction {
	pick := slices.Clone(tt.live[r])
	tt.rng.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
	acts := []tAction{{what: "bundle", arg: token}}
	n := min(len(pick), 8)
	for i := 0; i < n; i++ {
		what := "mqdel"
		if i%2 == 1 {
			what = "mqhold"
		}
		acts = append(acts, tAction{what: what, ids: []int64{pick[i]}})
	}
	var rel []int64
	for _, id := range slices.Sorted(maps.Keys(tt.held)) { // in order: the seed replays
		if !tt.unsure[id] && tt.rng.IntN(2) == 0 {
			rel = append(rel, id)
		}
	}
	if len(rel) > 0 {
		acts = append(acts, tAction{what: "mqrls", ids: rel})
	}
	if r > 0 {
		acts = append(acts, tAction{what: "purge", arg: fmt.Sprintf("pg%d", r-1)})
	}
	tt.rng.Shuffle(len(acts), func(i, j int) { acts[i], acts[j] = acts[j], acts[i] })
	for i := range acts {
		acts[i].pause = time.Duration(tt.rng.Int64N(int64(killAt)*5/4/int64(len(acts)) + 1))
	}
	return acts
}

// race runs the actions one after another, each after its pause, until
// the CLS dies; it must not fail the test (it runs beside the kill).
func (tt *torture) race(acts []tAction) []tAction {
	for i := range acts {
		a := &acts[i]
		time.Sleep(a.pause)
		ids := make([]string, len(a.ids))
		for k, id := range a.ids {
			ids[k] = strconv.FormatInt(id, 10)
		}
		switch a.what {
		case "mqdel", "mqhold", "mqrls":
			a.r = tt.try(a.what, ids...)
			a.acked = a.r.code == 0
		case "purge":
			target := a.arg
			a.r = tt.try("mqstat", "--json", "-t", target, "-s", "DFX")
			var js []protocol.JobInfo
			if a.r.code == 0 && json.Unmarshal([]byte(a.r.stdout), &js) == nil {
				for _, j := range js {
					a.before = append(a.before, j.ID)
				}
			}
			a.r = tt.try("cls", "purge", "--ended-before", "0", "--batch", "1", "-t", target)
			a.acked = a.r.code == 0
		case "bundle":
			a.reply, a.r = tt.submitBundle(a.arg)
			a.acked = a.r.code == 0
		}
	}
	return acts
}

// try runs an mq command; unlike run it never fails the test.
func (tt *torture) try(name string, args ...string) result {
	r, err := runBin(60*time.Second, tt.h.env(), tt.h.dir, nil, name, args...)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		r.stderr = err.Error()
	}
	return r
}

// submitBundle submits the bundle of token as one request with the token.
func (tt *torture) submitBundle(token string) ([]int64, result) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, tt.h.home, "", "torture")
	if err != nil {
		return nil, result{code: 1, stderr: err.Error()}
	}
	defer c.Close()
	rep, err := client.Do(ctx, c, protocol.OpSubmit, protocol.Submit{Jobs: tt.spec[token], Bundle: true, Token: token})
	if err != nil {
		return nil, result{code: 1, stderr: err.Error()}
	}
	return rep.IDs, result{}
}

// record takes what the raced actions were told.
func (tt *torture) record(acts []tAction) {
	for _, a := range acts {
		switch {
		case a.what == "mqdel":
			for _, id := range a.ids {
				if a.acked {
					tt.deleted[id] = -1
					delete(tt.held, id)
				} else {
					tt.unsure[id] = true
				}
			}
		case a.what == "mqhold":
			for _, id := range a.ids {
				if a.acked {
					if _, ok := tt.deleted[id]; !ok {
						tt.held[id] = -1
						tt.holds++
					}
				} else {
					tt.unsure[id] = true
				}
			}
		case a.what == "mqrls":
			for _, id := range a.ids {
				delete(tt.held, id)
				if !a.acked {
					tt.unsure[id] = true
				}
			}
		case a.what == "purge":
			tt.purgeOK[a.arg] = true
			if a.acked {
				for _, id := range a.before {
					tt.mustGone[id] = true
				}
			}
		}
	}
}

// resubmit sends the round's bundle again with its token: it must add
// nothing if the first was committed, and answer with the same ids.
func (tt *torture) resubmit(token string, acts []tAction) {
	var first []int64
	for _, a := range acts {
		if a.what == "bundle" && a.arg == token && a.acked {
			first = a.reply
		}
	}
	ids, r := tt.submitBundle(token)
	if r.code != 0 {
		tt.t.Fatalf("bundle %s resent after the restart: %s", token, r.stderr)
	}
	if first != nil && !slices.Equal(first, ids) {
		tt.t.Errorf("bundle %s: first submit answered %v, the resend %v", token, first, ids)
	}
	if len(ids) != len(tt.bundles[token]) {
		tt.t.Fatalf("bundle %s resent: ids %v for %d jobs", token, ids, len(tt.bundles[token]))
	}
	for i, id := range ids {
		tt.add(id, tt.bundles[token][i], nil, false)
	}
}

// integrity runs PRAGMA integrity_check on a read-only connection to mq.db.
func (tt *torture) integrity(when string) {
	t := tt.t
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(tt.h.home, "mq.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("PRAGMA integrity_check")
	if err != nil {
		t.Fatalf("%s: integrity_check: %v", when, err)
	}
	defer rows.Close()
	var res []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		res = append(res, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: integrity_check: %v", when, err)
	}
	if len(res) != 1 || res[0] != "ok" {
		t.Errorf("%s: PRAGMA integrity_check = %q, want ok", when, res)
	}
}

func (tt *torture) readMarks() map[int64]map[int]int { return readMarks(tt.t, tt.marks) }

// readMarks returns, per job, the attempts that started and how many
// processes each started: the lines of dir's files, named ID.ATTEMPT.
func readMarks(t *testing.T, dir string) map[int64]map[int]int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]map[int]int{}
	for _, e := range ents {
		ids, atts, _ := strings.Cut(e.Name(), ".")
		id, err1 := strconv.ParseInt(ids, 10, 64)
		att, err2 := strconv.Atoi(atts)
		if err1 != nil || err2 != nil {
			t.Fatalf("mark %s", e.Name())
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if out[id] == nil {
			out[id] = map[int]int{}
		}
		out[id][att] = strings.Count(string(b), "\n")
	}
	return out
}

// check compares what the CLS lists with what the torture was told; final
// says the work has drained, so every job must have ended as its
// prerequisites say.
func (tt *torture) check(when string, final bool) {
	t, h := tt.t, tt.h
	t.Helper()
	// The marks first: an attempt marked before the listing was claimed
	// before it. (The killed CLS's placeholders reconnect to this one, so
	// jobs run meanwhile.)
	marks := tt.readMarks()
	list := h.jobs("-s", allStates)
	byID := map[int64]jobInfo{}
	byTarget := map[string][]jobInfo{}
	for _, j := range list {
		if _, dup := byID[j.ID]; dup {
			t.Errorf("%s: job %d listed twice", when, j.ID)
		}
		byID[j.ID] = j
		byTarget[j.Target] = append(byTarget[j.Target], j)
		tj := tt.jobs[j.ID]
		if tj == nil {
			t.Errorf("%s: job %d (%s) listed, but no submit was answered with its id", when, j.ID, j.Target)
		} else if tj.target != j.Target {
			t.Errorf("%s: job %d has target %s, submitted as %s", when, j.ID, j.Target, tj.target)
		}
	}
	for _, id := range tt.order {
		tj := tt.jobs[id]
		if _, ok := byID[id]; ok {
			if tt.gone[id] {
				t.Errorf("%s: purged job %d is back", when, id)
			}
			continue
		}
		if !tt.purgeOK[tj.target] {
			t.Errorf("%s: job %d (%s) is lost", when, id, tj.target)
		}
		tt.gone[id] = true
	}
	for id := range tt.mustGone {
		if _, ok := byID[id]; ok {
			t.Errorf("%s: job %d ended before an acknowledged purge of its target, still listed", when, id)
		}
	}

	// Attempt numbers are never given twice, and the attempt a job ended
	// done in ran.
	for _, j := range list {
		for a, n := range marks[j.ID] {
			if a > j.Attempts {
				t.Errorf("%s: job %d (%s) has %d attempts, but its attempt %d ran", when, j.ID, j.Target, j.Attempts, a)
			}
			if n > 1 {
				t.Errorf("%s: job %d (%s) attempt %d ran %d times", when, j.ID, j.Target, a, n)
			}
		}
		if j.State == "D" && marks[j.ID][j.Attempts] == 0 { // it may have run since the marks were read
			if _, err := os.Stat(filepath.Join(tt.marks, fmt.Sprintf("%d.%d", j.ID, j.Attempts))); err != nil {
				t.Errorf("%s: job %d (%s) is done in attempt %d, which never ran (ran: %v)", when, j.ID, j.Target, j.Attempts, marks[j.ID])
			}
		}
	}

	// Acknowledged holds and deletes are in force; no attempt started
	// after them.
	for _, m := range []struct {
		ids   map[int64]int
		state string
		what  string
	}{{tt.held, "H", "held"}, {tt.deleted, "X", "deleted"}} {
		for id, att := range m.ids {
			j := byID[id]
			if j.State != m.state {
				t.Errorf("%s: job %d was %s (acknowledged), now %s", when, id, m.what, j.State)
				continue
			}
			if att < 0 {
				att = j.Attempts
				m.ids[id] = att
			} else if j.Attempts != att {
				t.Errorf("%s: %s job %d has %d attempts, had %d when it was %s", when, m.what, id, j.Attempts, att, m.what)
			}
			for a := range marks[id] {
				if a > att {
					t.Errorf("%s: %s job %d started attempt %d after it was %s at attempt %d", when, m.what, id, a, m.what, att)
				}
			}
		}
	}

	// No job done before all its prerequisites were.
	for _, j := range list {
		if j.State != "D" {
			continue
		}
		for _, p := range j.Prereqs {
			for _, pj := range byTarget[p] {
				if pj.State != "D" {
					t.Errorf("%s: job %d (%s) is D, its prerequisite job %d (%s) is %s", when, j.ID, j.Target, pj.ID, p, pj.State)
				} else if parseTime(t, "started", j.Started).Before(parseTime(t, "finished", pj.Finished)) {
					t.Errorf("%s: job %d (%s) started %s before its prerequisite job %d finished %s", when, j.ID, j.Target, j.Started, pj.ID, pj.Finished)
				}
			}
		}
	}
	if final {
		tt.checkEnded(list, byTarget)
	}
	tt.checkSummary(when)
	tt.checkOutput(when, list)
}

// checkEnded: with the work drained, each job ended as its command and its
// prerequisites say.
func (tt *torture) checkEnded(list []jobInfo, byTarget map[string][]jobInfo) {
	t := tt.t
	for _, j := range list {
		tj := tt.jobs[j.ID]
		if tj == nil {
			continue
		}
		_, del := tt.deleted[j.ID]
		if del || (tt.unsure[j.ID] && j.State == "X") {
			continue
		}
		if want := wantEnd(tj.prereqs, tj.fails, byTarget); j.State != want {
			t.Errorf("end: job %d (%s, prerequisites %v) is %s, want %s", j.ID, j.Target, tj.prereqs, j.State, want)
		}
	}
}

func (tt *torture) checkSummary(when string) { checkSummary(tt.t, tt.h, when) }

// checkSummary: h's mqstat --summary counts what its listing lists. Jobs
// may still change state between the two (reconnected placeholders,
// lapsing leases), so they need only agree once within a generous
// deadline.
func checkSummary(t *testing.T, h *harness, when string) {
	t.Helper()
	waitFor(t, time.Minute, func() error {
		want := map[string]map[string]int{}
		for _, j := range h.jobs("-s", allStates) {
			if want[j.Queue] == nil {
				want[j.Queue] = map[string]int{}
			}
			want[j.Queue][j.State]++
		}
		got := h.summary()
		for q, m := range got {
			for s, n := range m {
				if n == 0 {
					delete(m, s)
				}
			}
			if len(m) == 0 {
				delete(got, q)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("%s: mqstat --summary %v, the listing counts %v", when, got, want)
		}
		return nil
	})
}

var catHeader = regexp.MustCompile(`^==> job (\d+) attempt \d+ target (\S+) state D stdout <==$`)

// checkOutput: every done job's stdout is the line it wrote.
func (tt *torture) checkOutput(when string, list []jobInfo) {
	t := tt.t
	r := tt.h.run("mqstat", "--cat", "all", "-s", "D")
	if r.code != 0 {
		t.Errorf("%s: mqstat --cat all -s D: %s", when, r)
	}
	got := map[int64]string{}
	var cur int64
	for _, l := range strings.SplitAfter(r.stdout, "\n") {
		if m := catHeader.FindStringSubmatch(strings.TrimSuffix(l, "\n")); m != nil {
			cur, _ = strconv.ParseInt(m[1], 10, 64)
			got[cur] = ""
			continue
		}
		if cur == 0 {
			if l != "" {
				t.Errorf("%s: mqstat --cat all: output before any job: %q", when, l)
			}
			continue
		}
		got[cur] += l
	}
	for _, j := range list {
		if j.State != "D" {
			continue
		}
		want := fmt.Sprintf("out %s %d\n", j.Target, j.ID)
		if out, ok := got[j.ID]; !ok {
			t.Errorf("%s: mqstat --cat all -s D does not show done job %d", when, j.ID)
		} else if out != want {
			t.Errorf("%s: done job %d printed %q, want %q", when, j.ID, out, want)
		}
	}
}

// catSome: mqstat --cat ID of n done jobs prints the line each wrote.
func (tt *torture) catSome(n int) {
	var done []jobInfo
	for _, j := range tt.h.jobs("-s", "D") {
		done = append(done, j)
	}
	tt.rng.Shuffle(len(done), func(i, j int) { done[i], done[j] = done[j], done[i] })
	for _, j := range done[:min(n, len(done))] {
		want := fmt.Sprintf("out %s %d\n", j.Target, j.ID)
		if got := tt.h.ok("mqstat", "--cat", strconv.FormatInt(j.ID, 10)); got != want {
			tt.t.Errorf("mqstat --cat %d printed %q, want %q", j.ID, got, want)
		}
	}
}

// checkArrays: no array ran more members at once than its limit, by the
// attempts' start and finish times.
func (tt *torture) checkArrays() {
	t := tt.t
	type ev struct {
		at    time.Time
		delta int
		id    int64
	}
	for _, arr := range tt.arrays {
		var evs []ev
		for _, id := range arr {
			d := tt.h.job(id)
			spans := []struct{ Started, Finished string }{{d.Started, d.Finished}}
			for _, a := range d.History {
				spans = append(spans, struct{ Started, Finished string }{a.Started, a.Finished})
			}
			for _, s := range spans {
				if s.Started == "" {
					continue
				}
				if s.Finished == "" {
					t.Errorf("array job %d: an attempt started %s has no finish time", id, s.Started)
					continue
				}
				evs = append(evs, ev{parseTime(t, "started", s.Started), +1, id}, ev{parseTime(t, "finished", s.Finished), -1, id})
			}
		}
		sort.Slice(evs, func(i, j int) bool {
			if !evs[i].at.Equal(evs[j].at) {
				return evs[i].at.Before(evs[j].at)
			}
			return evs[i].delta < evs[j].delta // a finish before a start at the same time
		})
		n, most := 0, 0
		for _, e := range evs {
			n += e.delta
			if n > tt.limit {
				t.Errorf("array %d-%d: %d members executing at %s (job %d started), limit %d", arr[0], arr[len(arr)-1], n, e.at.Format(time.RFC3339Nano), e.id, tt.limit)
			}
			most = max(most, n)
		}
		t.Logf("array %d-%d: at most %d members executing at once", arr[0], arr[len(arr)-1], most)
	}
}

// wantEnd is how a job ends once the work drained, by
// docs/reference/semantics.md: B if a job of one of its prerequisite
// targets (byTarget) did not end D, else F if its command fails, else D.
func wantEnd(prereqs []string, fails bool, byTarget map[string][]jobInfo) string {
	for _, p := range prereqs {
		for _, pj := range byTarget[p] {
			if pj.State != "D" {
				return "B"
			}
		}
	}
	if fails {
		return "F"
	}
	return "D"
}
