//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSoak runs a randomized workload for MQ_SOAK_SECONDS (skipped when
// unset): submits of single jobs with -o/-e files, arrays, chains with
// prerequisites and after-any ones, failing jobs, held jobs, jobs waited
// on with mqsub -b; mqdel,
// mqalter, mqhold, mqrls and mqwait raced against SIGKILLs of the CLS and
// of its placeholders, a placeholder SIGSTOPped past its lease, and a
// full MQ_HOME (a tmpfs, when root may mount one). After each round it
// restarts the CLS and checks what it holds; at the end it drains the
// work and checks how every job ended. scripts/soak.sh runs it.
//
// MQ_SOAK_SEED replays a run's choices (the timing differs).
func TestSoak(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("MQ_SOAK_SECONDS"))
	if secs <= 0 {
		t.Skip("MQ_SOAK_SECONDS not set (scripts/soak.sh)")
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("MQ_SOAK_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("MQ_SOAK_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with MQ_SOAK_SEED=%d), %d s", seed, seed, secs)
	s := newSoak(t, seed)
	if os.Getenv("MQ_SOAK_TMPFS") != "" {
		s.tmpfs = true
		s.h.tmpfsHome(48 << 20)
	}
	s.h.startCLS(s.serveArgs...)
	s.h.ok("cls", "queue", "set", "default", "--max-attempts", "100")
	s.h.ok("cls", "queue", "set", "noretry", "--max-attempts", "100")
	end := time.Now().Add(time.Duration(secs) * time.Second)
	r := 0
	for ; time.Now().Before(end) && !t.Failed(); r++ {
		s.round(r)
	}
	s.drain()
	t.Logf("%d rounds, %d jobs submitted (%d submits of unknown outcome), %d CLS kills, %d agent kills, %d agent stops, %d full disks, %d waits",
		r, len(s.jobs), len(s.unsureSubmits), s.clsKills, s.agentKills, s.stops, s.fulls, s.waits)
}

// sSpec is what one mqsub asked for.
type sSpec struct {
	target   string
	prereqs  []string // -p
	afterAny []string // --after-any
	fails    bool
	files    bool // -o/-e files o.ID, e.ID
	held     bool
	n        int // jobs (an array's members)
}

type soak struct {
	t         *testing.T
	h         *harness
	rng       *rand.Rand
	marks     string
	serveArgs []string
	tmpfs     bool

	rngMu sync.Mutex // rng is not safe for concurrent use; the workers share it

	mu            sync.Mutex
	specs         map[string]*sSpec // by target: every submit tried
	jobs          map[int64]*sSpec  // acknowledged ids
	order         []int64
	unsureSubmits map[string]bool // target: submit of unknown outcome
	deleted       map[int64]bool  // acknowledged
	held          map[int64]bool  // acknowledged, not released
	unsure        map[int64]bool  // a delete, hold or release of unknown outcome
	waitedDone    []int64         // mqwait said these all ended done
	targets       []string

	clsKills, agentKills, stops, fulls, waits int
}

func newSoak(t *testing.T, seed int64) *soak {
	h := newHarness(t)
	s := &soak{
		t: t, h: h,
		rng:       rand.New(rand.NewPCG(uint64(seed), 0x50a4)),
		marks:     filepath.Join(h.dir, "marks"),
		serveArgs: []string{"--local", "2", "--slots", "2", "--lease", "3s"},
		specs:     map[string]*sSpec{}, jobs: map[int64]*sSpec{},
		unsureSubmits: map[string]bool{}, deleted: map[int64]bool{}, held: map[int64]bool{}, unsure: map[int64]bool{},
	}
	if err := os.Mkdir(s.marks, 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *soak) intN(n int) int {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.IntN(n)
}

func (s *soak) int64N(n int64) int64 {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Int64N(n)
}

func (s *soak) try(name string, args ...string) result {
	r, err := runBin(90*time.Second, s.h.env(), s.h.dir, nil, name, args...)
	if err != nil && r.code == 0 {
		r.code = -1
	}
	if err != nil && r.stderr == "" {
		r.stderr = err.Error()
	}
	if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
		s.t.Errorf("%s %s panicked: %s", name, shortArgs(args), r.stderr)
	}
	return r
}

// command marks the attempt, sleeps, and writes a line to each stream.
func (s *soak) command(fails bool) string {
	c := fmt.Sprintf(`echo $$ >> %s/$MQ_JOB_ID.$MQ_ATTEMPT; sleep 0.%02d; echo "out $MQ_TARGET $MQ_JOB_ID"; echo "err $MQ_JOB_ID" >&2`, s.marks, s.intN(60))
	if s.intN(6) == 0 {
		c = strings.Replace(c, "sleep 0.", "sleep 2.", 1)
	}
	if fails {
		c += "; exit 3"
	}
	return c
}

// submit tries one random mqsub; it may race a kill.
func (s *soak) submit(r, k int) {
	sp := &sSpec{target: fmt.Sprintf("t%d_%d", r, k), n: 1}
	args := []string{}
	switch x := s.intN(10); {
	case x < 2:
		sp.n = 2 + s.intN(6)
		args = append(args, "--array", fmt.Sprintf("1-%d%%%d", sp.n, 1+s.intN(3)))
	case x < 3:
		sp.fails = true
		args = append(args, "-q", "noretry")
	}
	s.mu.Lock()
	if len(s.targets) > 0 && s.intN(2) == 0 {
		p := s.targets[s.intN(len(s.targets))]
		if s.intN(3) == 0 {
			sp.afterAny = []string{p}
			args = append(args, "--after-any", p)
		} else {
			sp.prereqs = []string{p}
			args = append(args, "-p", p)
		}
	}
	s.specs[sp.target] = sp
	s.mu.Unlock()
	if sp.n == 1 && s.intN(2) == 0 {
		sp.files = true
		args = append(args, "-o", "o.%j", "-e", "e.%j")
	}
	wait := false
	if s.intN(8) == 0 {
		sp.held = true
		args = append(args, "-H")
	} else if sp.n == 1 && s.intN(6) == 0 {
		// mqsub -b waits across a restart of the CLS; 0 says the job is done.
		wait = true
		args = append(args, "-b", "--timeout", "20s")
	}
	args = append(args, sp.target, s.command(sp.fails))
	res := s.try("mqsub", args...)
	ids := strings.Fields(res.stdout)
	s.mu.Lock()
	defer s.mu.Unlock()
	if wait && len(ids) == 1 {
		id, _ := strconv.ParseInt(ids[0], 10, 64)
		if res.code == 0 {
			s.waitedDone = append(s.waitedDone, id)
		}
		if res.code == 0 && sp.fails {
			s.t.Errorf("mqsub -b of failing job %d exited 0", id)
		}
		res.code = 0 // the submit was acknowledged: it printed the id
	}
	if res.code != 0 || len(ids) != sp.n {
		s.unsureSubmits[sp.target] = true
		if len(ids) > 0 {
			s.t.Errorf("mqsub %s: exit %d but printed %q: %s", shortArgs(args), res.code, res.stdout, res.stderr)
		}
		return
	}
	for _, f := range ids {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			s.t.Errorf("mqsub printed %q", res.stdout)
			return
		}
		if s.jobs[id] != nil {
			s.t.Errorf("job id %d given twice (%s, then %s)", id, s.jobs[id].target, sp.target)
		}
		s.jobs[id] = sp
		s.order = append(s.order, id)
		if sp.held {
			s.held[id] = true
		}
	}
	s.targets = append(s.targets, sp.target)
}

// act runs one random user action on known jobs; it may race a kill.
func (s *soak) act() {
	s.mu.Lock()
	if len(s.order) == 0 {
		s.mu.Unlock()
		return
	}
	id := s.order[len(s.order)-1-s.intN(min(len(s.order), 60))]
	ids := []string{strconv.FormatInt(id, 10)}
	what := []string{"mqdel", "mqhold", "mqrls", "mqalter", "mqwait", "mqwait"}[s.intN(6)]
	if what == "mqwait" {
		for i := 0; i < 3; i++ {
			ids = append(ids, strconv.FormatInt(s.order[s.intN(len(s.order))], 10))
		}
	}
	prio := strconv.Itoa(s.intN(20) - 10)
	s.mu.Unlock()
	var res result
	switch what {
	case "mqalter":
		res = s.try("mqalter", append([]string{"-Q", "--priority", prio}, ids...)...)
	case "mqwait":
		res = s.try("mqwait", append([]string{"-Q", "--timeout", "6s"}, ids...)...)
	default:
		res = s.try(what, append([]string{"-Q"}, ids...)...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch what {
	case "mqdel":
		if res.code == 0 {
			s.deleted[id] = true
			delete(s.held, id)
		} else {
			s.unsure[id] = true
		}
	case "mqhold":
		if res.code == 0 && !s.deleted[id] {
			s.held[id] = true
		} else if res.code != 0 {
			s.unsure[id] = true
		}
	case "mqrls":
		delete(s.held, id)
		if res.code != 0 {
			s.unsure[id] = true
		}
	case "mqwait":
		s.waits++
		if res.code == 0 {
			for _, f := range ids {
				n, _ := strconv.ParseInt(f, 10, 64)
				s.waitedDone = append(s.waitedDone, n)
			}
		}
	}
}

// agentPids lists this harness's placeholders, the killed CLSs' too.
func (s *soak) agentPids() []int {
	var out []int
	for _, p := range s.h.ownProcs() {
		if strings.Contains(cmdline(p), " agent ") {
			out = append(out, p)
		}
	}
	return out
}

// round submits and acts while something bad happens, then restarts the
// CLS and checks it.
func (s *soak) round(r int) {
	t, h := s.t, s.h
	start := time.Now()
	killAt := time.Duration(300+s.intN(3000)) * time.Millisecond
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		n := 2 + s.intN(5)
		base := w * 100
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < n; k++ {
				s.mu.Lock()
				doSubmit := s.intN(3) != 0
				pause := time.Duration(s.int64N(int64(killAt) / int64(n)))
				s.mu.Unlock()
				time.Sleep(pause)
				if doSubmit {
					s.submit(r, base+k)
				} else {
					s.act()
				}
			}
		}()
	}
	event := s.intN(10)
	if e, err := strconv.Atoi(os.Getenv("MQ_SOAK_EVENT")); err == nil {
		event = e // 0-4 kill the CLS, 5-6 an agent, 7 stop an agent, 8 fill the disk, 9 nothing
	}
	time.Sleep(killAt)
	switch {
	case event < 5:
		h.stopCLS(syscall.SIGKILL, time.Minute)
		s.clsKills++
	case event < 7:
		if a := s.agentPids(); len(a) > 0 {
			syscall.Kill(a[s.intN(len(a))], syscall.SIGKILL)
			s.agentKills++
		}
	case event < 8:
		if a := s.agentPids(); len(a) > 0 {
			p := a[s.intN(len(a))]
			syscall.Kill(p, syscall.SIGSTOP)
			s.stops++
			time.Sleep(time.Duration(5+s.intN(10)) * time.Second)
			syscall.Kill(p, syscall.SIGCONT)
		}
	case event < 9 && s.tmpfs:
		s.fullDisk()
	}
	wg.Wait()
	if h.cls.exited() {
		if st := h.cls.cmd.ProcessState; st != nil && !strings.Contains(st.String(), "killed") {
			t.Errorf("round %d: the CLS exited by itself: %v: %s", r, st, h.cls.stderr.String())
		}
		h.startCLS(s.serveArgs...)
	}
	s.check(fmt.Sprintf("round %d", r), false)
	t.Logf("round %d: event %d, %d jobs, %v", r, event, len(s.jobs), time.Since(start).Round(time.Millisecond))
}

// fullDisk fills MQ_HOME, checks the CLS still answers and refuses a
// submit in one line, then frees it.
func (s *soak) fullDisk() {
	t, h := s.t, s.h
	s.fulls++
	// The reserve that lets a delete through: a CLS started on a full
	// disk makes it once there is room, looking every 10 s.
	waitFor(t, time.Minute, func() error {
		if fi, err := os.Stat(filepath.Join(h.home, "reserve")); err != nil || fi.Size() == 0 {
			return fmt.Errorf("no reserve in MQ_HOME yet: %v", err)
		}
		return nil
	})
	f := fill(t, h.home)
	defer os.Remove(f)
	for i := 0; i < 3; i++ {
		if r := s.try("mqstat"); r.code != 0 {
			t.Errorf("full disk: mqstat: %s", r)
		}
		r := s.try("mqsub", "full", "true")
		if r.code == 0 {
			s.mu.Lock()
			id, _ := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
			sp := &sSpec{target: "full", n: 1}
			s.specs["full"], s.jobs[id] = sp, sp
			s.order = append(s.order, id)
			s.mu.Unlock()
		} else if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 || r.code != 1 {
			t.Errorf("full disk: mqsub: want one line and exit 1: %s", r)
		}
		s.act()
		time.Sleep(time.Duration(s.intN(1500)) * time.Millisecond)
	}
	s.delOnFull()
	if s.intN(2) == 0 {
		h.stopCLS(syscall.SIGKILL, time.Minute)
		s.clsKills++
		// A CLS started on a full disk must come up, or say why in one line.
		h.startCLS(s.serveArgs...)
	}
}

// delOnFull deletes a job not started, which must work on a full disk
// (the CLS released its reserve at the first commit that failed).
func (s *soak) delOnFull() {
	var id int64
	var js []jobInfo
	r := s.try("mqstat", "--json", "-s", "WQH") // on stderr, a warning of the paused placeholders
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil {
		s.t.Errorf("full disk: mqstat --json: %v: %s", err, r)
	}
	s.mu.Lock()
	for _, j := range js {
		if s.jobs[j.ID] != nil {
			id = j.ID
		}
	}
	s.mu.Unlock()
	if id == 0 {
		return
	}
	r = s.try("mqdel", "-Q", strconv.FormatInt(id, 10))
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.code == 0:
		s.deleted[id] = true
		delete(s.held, id)
	case strings.Contains(r.stderr, "has already"): // it ran meanwhile
	default:
		s.unsure[id] = true
		s.t.Errorf("full disk: mqdel %d: %s", id, r)
	}
}

// check compares what the CLS lists with what the soak was told.
func (s *soak) check(when string, final bool) {
	t, h := s.t, s.h
	t.Helper()
	marks := s.readMarks()
	list := h.jobs("-s", allStates)
	byID := map[int64]jobInfo{}
	byTarget := map[string][]jobInfo{}
	for _, j := range list {
		if _, dup := byID[j.ID]; dup {
			t.Errorf("%s: job %d listed twice", when, j.ID)
		}
		if len(j.State) != 1 || !strings.Contains(allStates, j.State) {
			t.Errorf("%s: job %d in state %q", when, j.ID, j.State)
		}
		byID[j.ID] = j
		byTarget[j.Target] = append(byTarget[j.Target], j)
		sp := s.jobs[j.ID]
		switch {
		case sp == nil && !s.unsureSubmits[j.Target]:
			t.Errorf("%s: job %d (%s) listed, but no submit was answered with its id", when, j.ID, j.Target)
		case sp != nil && sp.target != j.Target:
			t.Errorf("%s: job %d has target %s, submitted as %s", when, j.ID, j.Target, sp.target)
		}
	}
	for _, id := range s.order {
		if _, ok := byID[id]; !ok {
			t.Errorf("%s: job %d (%s) acknowledged, not listed", when, id, s.jobs[id].target)
		}
	}
	for tg := range s.unsureSubmits {
		if n := len(byTarget[tg]); n != 0 && n != s.specs[tg].n {
			t.Errorf("%s: submit of %s (unknown outcome) has %d of its %d jobs", when, tg, n, s.specs[tg].n)
		}
	}
	for _, j := range list {
		for a, n := range marks[j.ID] {
			if a > j.Attempts {
				t.Errorf("%s: job %d (%s) has %d attempts, but its attempt %d ran", when, j.ID, j.Target, j.Attempts, a)
			}
			if n > 1 {
				t.Errorf("%s: job %d attempt %d ran %d times", when, j.ID, a, n)
			}
		}
	}
	for id := range s.deleted {
		if j := byID[id]; j.State != "X" {
			t.Errorf("%s: job %d was deleted (acknowledged), now %s", when, id, j.State)
		}
	}
	for id := range s.held {
		if j := byID[id]; j.State != "H" {
			t.Errorf("%s: job %d was held (acknowledged), now %s", when, id, j.State)
		}
	}
	for _, id := range s.waitedDone {
		if j := byID[id]; j.State != "D" {
			t.Errorf("%s: mqwait %d exited 0, the job is %s", when, id, j.State)
		}
	}
	for _, j := range list {
		sp := s.specs[j.Target]
		if j.State != "D" || sp == nil {
			continue
		}
		for _, p := range sp.prereqs {
			for _, pj := range byTarget[p] {
				if pj.State != "D" {
					t.Errorf("%s: job %d (%s) is D, its prerequisite job %d (%s) is %s", when, j.ID, j.Target, pj.ID, p, pj.State)
				}
			}
		}
		for _, p := range sp.afterAny {
			for _, pj := range byTarget[p] {
				if !strings.Contains("DFXB", pj.State) {
					t.Errorf("%s: job %d (%s) is D, its after-any prerequisite job %d (%s) is %s", when, j.ID, j.Target, pj.ID, p, pj.State)
				}
			}
		}
		if sp.files {
			for _, f := range []struct{ name, want string }{
				{"o.", fmt.Sprintf("out %s %d\n", j.Target, j.ID)},
				{"e.", fmt.Sprintf("err %d\n", j.ID)},
			} {
				b, err := os.ReadFile(filepath.Join(h.dir, f.name+strconv.FormatInt(j.ID, 10)))
				if err != nil || string(b) != f.want {
					t.Errorf("%s: done job %d: %s%d holds %q (%v), want %q", when, j.ID, f.name, j.ID, b, err, f.want)
					s.explain(j.ID, marks)
				}
			}
		}
	}
	if final {
		s.checkEnded(list, byTarget)
	}
	s.checkSummary(when)
	s.checkCat(when, list)
}

func (s *soak) readMarks() map[int64]map[int]int { return readMarks(s.t, s.marks) }

func (s *soak) checkSummary(when string) { checkSummary(s.t, s.h, when) }

// checkCat: every done job's stdout, as mqstat --cat prints it, is the
// line it wrote, once.
func (s *soak) checkCat(when string, list []jobInfo) {
	r := s.try("mqstat", "--cat", "all", "-s", "D")
	if r.code != 0 {
		if !strings.Contains(r.stderr, "no job") {
			s.t.Errorf("%s: mqstat --cat all -s D: %s", when, r)
		}
		return
	}
	got := map[int64]string{}
	var cur int64
	for _, l := range strings.SplitAfter(r.stdout, "\n") {
		if m := catHeader.FindStringSubmatch(strings.TrimSuffix(l, "\n")); m != nil {
			cur, _ = strconv.ParseInt(m[1], 10, 64)
			got[cur] = ""
			continue
		}
		if cur != 0 {
			got[cur] += l
		}
	}
	for _, j := range list {
		if j.State != "D" || j.Target == "full" {
			continue
		}
		want := fmt.Sprintf("out %s %d\n", j.Target, j.ID)
		if out, ok := got[j.ID]; !ok {
			s.t.Errorf("%s: mqstat --cat all -s D does not show done job %d", when, j.ID)
		} else if out != want {
			s.t.Errorf("%s: done job %d printed %q, want %q", when, j.ID, out, want)
		}
	}
}

// drain releases every hold, waits for every job to end, and checks.
func (s *soak) drain() {
	t, h := s.t, s.h
	if h.cls.exited() {
		h.startCLS(s.serveArgs...)
	}
	s.try("mqrls", "--all", "-Q")
	clear(s.held)
	waitFor(t, 5*time.Minute, func() error {
		s.try("mqrls", "--all", "-Q") // holds of unknown outcome
		live := 0
		for _, j := range h.jobs("-s", allStates) {
			if !strings.Contains("DFXB", j.State) {
				live++
			}
		}
		if live > 0 {
			return fmt.Errorf("%d jobs not ended", live)
		}
		return nil
	})
	s.check("end", true)
	h.stopCLS(syscall.SIGTERM, 30*time.Second)
	if out := h.cls.stderr.String(); strings.Contains(out, "panic") {
		t.Errorf("cls: %s", out)
	}
	b, _ := os.ReadFile(filepath.Join(h.home, "cls.log"))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "panic") || strings.Contains(l, "level=ERROR") {
			t.Logf("cls.log: %s", l)
		}
	}
}

// checkEnded: with the work drained, each job ended as its command and
// its prerequisites say (docs/reference/semantics.md).
func (s *soak) checkEnded(list []jobInfo, byTarget map[string][]jobInfo) {
	for _, j := range list {
		sp := s.specs[j.Target]
		if sp == nil || s.deleted[j.ID] || (s.unsure[j.ID] && j.State == "X") {
			continue
		}
		if want := wantEnd(sp.prereqs, sp.fails, byTarget); j.State != want {
			s.t.Errorf("end: job %d (%s, -p %v, --after-any %v) is %s, want %s", j.ID, j.Target, sp.prereqs, sp.afterAny, j.State, want)
		}
	}
}

// explain logs what is known of job id: its history, its marks, and the
// lines of cls.log that name it.
func (s *soak) explain(id int64, marks map[int64]map[int]int) {
	r := s.try("mqstat", "-j", strconv.FormatInt(id, 10))
	s.t.Logf("job %d: marks %v\n%s", id, marks[id], r.stdout)
	b, _ := os.ReadFile(filepath.Join(s.h.home, "cls.log"))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, fmt.Sprintf("job=%d ", id)) || strings.Contains(l, fmt.Sprintf("job=%d\n", id)) {
			s.t.Logf("cls.log: %s", l)
		}
	}
}
