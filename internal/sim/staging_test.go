package sim

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/policy"
)

// twoHosts is a workload of 1 MB inputs on two hosts: old and d read a
// (host 0), young reads b (host 1), c reads c (host 0); submitted in that
// order.
const twoHosts = `{"files":[{"name":"a","bytes":1000000,"host":0},{"name":"b","bytes":1000000,"host":1},{"name":"c","bytes":1000000,"host":0}],
	"jobs":[{"name":"old","runtime_s":10,"in":["a"]},{"name":"young","runtime_s":10,"in":["b"]},
	        {"name":"c","runtime_s":10,"in":["c"]},{"name":"d","runtime_s":10,"in":["a"]}]}`

// liveModel is a live-staging model of doc with 2 placeholders, one per
// host, at time 0 with its first phase submitted.
func liveModel(t *testing.T, doc, pol string) *model {
	t.Helper()
	m, err := newModel(mustWorkload(t, doc), quiet, Config{Policy: pol, Placeholders: 2, Seed: 1, Staging: StagingLive})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *model) jobNamed(t *testing.T, name string) int32 {
	t.Helper()
	for j, job := range m.w.Jobs {
		if job.Name == name {
			return int32(j)
		}
	}
	t.Fatalf("no job %q", name)
	return -1
}

func (m *model) name(j int32) string {
	if j < 0 {
		return "none"
	}
	return m.w.Jobs[j].Name
}

// TestLiveOrderedStaging: an ordered queue gives the asking placeholder
// the first job whose inputs are at its host, starts bringing the inputs
// of the one older job it passed over (one: the placeholder has one free
// slot), keeps that job from other hosts until they land, and keeps the
// copy, so a second job reading the same file there moves nothing.
func TestLiveOrderedStaging(t *testing.T) {
	t.Parallel()
	for _, pol := range []string{"fcfs", "sjf", "cp"} {
		t.Run(pol, func(t *testing.T) {
			t.Parallel()
			m := liveModel(t, twoHosts, pol)
			old, d := m.jobNamed(t, "old"), m.jobNamed(t, "d")
			// Host 1 asks: old's input is at host 0, young's here.
			if j, _ := m.chooseLive(1); m.name(j) != "young" {
				t.Fatalf("host 1 got %s, want young", m.name(j))
			}
			x := m.live.xfers
			if len(x) != 1 || x[0].key != (stageKey{0, 1}) || !slices.Equal(x[0].jobs, []int32{old}) || m.res.Transfers != 1 || m.res.BytesMoved != 1000000 {
				t.Fatalf("transfers %+v, counted %d (%d B); want old's input a brought to host 1", x, m.res.Transfers, m.res.BytesMoved)
			}
			if m.jobs[old].mark != 1 || m.live.marks[1] != 1 {
				t.Fatalf("old marked %d, host 1 has %d marks", m.jobs[old].mark, m.live.marks[1])
			}
			// Host 1 asks again: c's input is at host 0 too, but one job is
			// being staged to host 1 already: nothing more is asked for.
			if j, _ := m.chooseLive(1); j >= 0 || len(m.live.xfers) != 1 {
				t.Fatalf("host 1 got %s with %d transfers; want nothing and no new transfer", m.name(j), len(m.live.xfers))
			}
			// Host 0 holds old's input, but old is staging to host 1: c.
			if j, _ := m.chooseLive(0); m.name(j) != "c" {
				t.Fatalf("host 0 got %s, want c (old is marked to host 1)", m.name(j))
			}
			m.c.now = 5
			m.staged(0)
			if !slices.Equal(m.live.reps[0], []policy.Site{0, 1}) || m.jobs[old].mark != noMark || m.live.marks[1] != 0 {
				t.Fatalf("after the transfer: copies %v, old marked %d", m.live.reps[0], m.jobs[old].mark)
			}
			if j, _ := m.chooseLive(1); j != old {
				t.Fatalf("host 1 got %s after old's input landed", m.name(j))
			}
			if j, _ := m.chooseLive(1); j != d || m.res.Transfers != 1 || m.res.BytesMoved != 1000000 {
				t.Fatalf("host 1 got %s, %d transfers; want d from the copy already there", m.name(j), m.res.Transfers)
			}
			// Staged for old to host 1; nothing brought for d.
			if !slices.Equal(m.jobs[old].stagedTo, []policy.Site{1}) || m.jobs[d].stagedTo != nil {
				t.Fatalf("staged for old %v, for d %v", m.jobs[old].stagedTo, m.jobs[d].stagedTo)
			}
		})
	}
}

// TestLiveSharedTransfer: two jobs wanting one file at one host share
// one transfer, and both may run once it lands.
func TestLiveSharedTransfer(t *testing.T) {
	t.Parallel()
	m := liveModel(t, twoHosts, "dc")
	old, d := m.jobNamed(t, "old"), m.jobNamed(t, "d")
	if m.inputsAt(old, 1) || m.inputsAt(d, 1) {
		t.Fatal("inputs at host 1 before any transfer")
	}
	if len(m.live.xfers) != 1 || len(m.live.xfers[0].jobs) != 2 || m.res.Transfers != 1 || m.jobs[old].mark != 1 || m.jobs[d].mark != 1 {
		t.Fatalf("transfers %+v; want one for both", m.live.xfers)
	}
	if m.inputsAt(old, 0) {
		t.Fatal("old is ready at host 0 while its input is on its way to host 1")
	}
	m.staged(0)
	if !m.inputsAt(old, 1) || !m.inputsAt(d, 1) || m.live.marks[1] != 0 {
		t.Fatal("inputs not at host 1 after the transfer")
	}
}

// TestLiveDCStagesChosen: DC's choice whose inputs are elsewhere is
// brought here and the placeholder gets DC's choice among the jobs whose
// inputs are here meanwhile, or waits; no other job is staged; other
// hosts do not consider a job being staged elsewhere.
func TestLiveDCStagesChosen(t *testing.T) {
	t.Parallel()
	// x's and y's inputs at host 0, z's and w's at host 1; host 1 asks
	// with no other placeholder expected, so DC takes the oldest, x, and
	// brings its input to host 1.
	m := liveModel(t, `{"files":[{"name":"a","bytes":1000000,"host":0},{"name":"b","bytes":1000000,"host":0},
		{"name":"h","bytes":1,"host":1},{"name":"g","bytes":1,"host":1}],
		"jobs":[{"name":"x","runtime_s":10,"in":["a"]},{"name":"y","runtime_s":10,"in":["b"]},
		        {"name":"z","runtime_s":1,"in":["h"]},{"name":"w","runtime_s":1,"in":["g"]}]}`, "dc")
	if j, waited := m.chooseLive(1); m.name(j) != "z" || waited {
		t.Fatalf("host 1 got %s (waited %v); want z, whose input is here, while x's comes", m.name(j), waited)
	}
	if x := m.live.xfers; len(x) != 1 || x[0].key != (stageKey{0, 1}) {
		t.Fatalf("transfers %+v; want only x's input, to host 1", x)
	}
	if j, _ := m.chooseLive(1); m.name(j) != "w" {
		t.Fatalf("host 1 got %s; want w", m.name(j))
	}
	if j, waited := m.chooseLive(1); j >= 0 || !waited || len(m.live.xfers) != 1 {
		t.Fatalf("host 1 got %s (waited %v), %d transfers; want a wait: x's input is coming and y is not chosen", m.name(j), waited, len(m.live.xfers))
	}
	// Host 0 skips x (staging to host 1) and gets y; then nothing is
	// left for it to decide on.
	if j, _ := m.chooseLive(0); m.name(j) != "y" {
		t.Fatalf("host 0 got %s, want y", m.name(j))
	}
	if j, waited := m.chooseLive(0); j >= 0 || waited {
		t.Fatalf("host 0 got %s (waited %v); want nothing to decide: x is staging to host 1", m.name(j), waited)
	}
}

// TestLiveByHand: timings worked by hand on the quiet platform (one way
// L, CLS busy S, a 20,000 B copy 1.58 s).
func TestLiveByHand(t *testing.T) {
	t.Parallel()
	const L, S, R = 0.155, 0.35, 2*0.155 + 0.35 // R: one request's round trip
	calm := quiet
	calm.Name, calm.OtherJob = "calm", 10
	start := newRand(1).Float64() * calm.OtherJob // the host's first turn
	var ten strings.Builder
	for i := range 10 {
		if i > 0 {
			ten.WriteString(",")
		}
		ten.WriteString(`{"name":"f` + itoa(i) + `","bytes":20000}`)
	}
	tests := []struct {
		name     string
		doc      string
		p        Platform
		makespan float64
		affinity float64
		moved    int64
	}{
		// The CLS starts the copy on the first ask (L); the placeholder
		// asks every R; the third ask (2R+L) finds it not there yet (it
		// lands at L+1.58) and its empty reply comes at 3R, after the copy
		// landed: the request is decided again and the job runs at 3R.
		{"input from outside, asking again at once", `{"files":[{"name":"in","bytes":20000}],"jobs":[{"name":"a","runtime_s":10,"in":["in"]}]}`,
			quiet, 3*R + 10 + L, 0, 20000},
		// The host's next turn is 10 s away: the copy landing wakes the
		// parked placeholder, whose reply leaves at once.
		{"parked placeholder woken by the copy", `{"files":[{"name":"in","bytes":20000}],"jobs":[{"name":"a","runtime_s":10,"in":["in"]}]}`,
			calm, start + L + 1.58 + L + 10 + L, 0, 20000},
		// Ten files, four at a time: the last lands at L + 3*1.58; the ask
		// served then (at 7R+L) misses it by 0.12 s, its reply at 8R runs it.
		{"four transfers at a time", `{"files":[` + ten.String() + `],"jobs":[{"name":"a","runtime_s":10,"in":["f0","f1","f2","f3","f4","f5","f6","f7","f8","f9"]}]}`,
			quiet, 8*R + 10 + L, 0, 200000},
		{"no inputs", `{"jobs":[{"name":"a","runtime_s":10}]}`, quiet, R + 10 + L, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, pol := range []string{"fcfs", "dc"} {
				r, err := Run(mustWorkload(t, tc.doc), tc.p, Config{Policy: pol, Placeholders: 1, Seed: 1, Staging: StagingLive})
				if err != nil {
					t.Fatal(err)
				}
				if !near(r.Makespan, tc.makespan) || !near(r.DataAffinity, tc.affinity) || r.BytesMoved != tc.moved {
					t.Fatalf("%s: makespan %v affinity %v moved %d; want %v %v %d", pol, r.Makespan, r.DataAffinity, r.BytesMoved, tc.makespan, tc.affinity, tc.moved)
				}
			}
		})
	}
}

// TestLiveDCMovesLessThanFCFS: the thesis's workload at x100 over the
// WAN: with live staging DC moves no more bytes than FCFS, and places at
// least as many tasks with their data; every transfer is counted,
// including those made for jobs another host then ran.
func TestLiveDCMovesLessThanFCFS(t *testing.T) {
	t.Parallel()
	for _, phs := range []int{2, 8} {
		for seed := uint64(1); seed <= 3; seed++ {
			w := PA(seed, 300, 16)
			cfg := Config{Placeholders: phs, Inflation: 100, Seed: seed, Staging: StagingLive}
			cfg.Policy = "fcfs"
			fcfs, err := Run(w, WAN, cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Policy = "dc"
			dc, err := Run(w, WAN, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if dc.BytesMoved > fcfs.BytesMoved || dc.DataAffinity < fcfs.DataAffinity {
				t.Errorf("%d placeholders seed %d: dc moved %d B (affinity %v), fcfs %d B (%v)", phs, seed, dc.BytesMoved, dc.DataAffinity, fcfs.BytesMoved, fcfs.DataAffinity)
			}
			// Every sequence file comes from outside once per host it is
			// read at: at least once.
			var seqs int64
			for _, f := range w.Files {
				if f.Host < 0 {
					seqs += f.Bytes
				}
			}
			if dc.BytesMoved < seqs || dc.DataAffinity > 0.5 {
				t.Errorf("dc moved %d B, less than the %d B of sequence files, affinity %v", dc.BytesMoved, seqs, dc.DataAffinity)
			}
		}
	}
}

// TestStagingModes: the default is inline, unchanged (the same numbers
// as before live staging existed: pinned for the thesis's workload);
// live differs; an unknown mode is an error; runs with more than 64
// hosts work.
func TestStagingModes(t *testing.T) {
	t.Parallel()
	w := PA(1, 1000, 16)
	golden := map[string][2]float64{ // makespan, bytes moved; WAN x100, 2 placeholders, seed 1
		"fcfs": {6618.928659035711, 2579078112},
		"dc":   {3742.623869650466, 562512},
	}
	for pol, want := range golden {
		def, err := Run(w, WAN, Config{Policy: pol, Placeholders: 2, Inflation: 100, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		inline, _ := Run(w, WAN, Config{Policy: pol, Placeholders: 2, Inflation: 100, Seed: 1, Staging: StagingInline})
		live, _ := Run(w, WAN, Config{Policy: pol, Placeholders: 2, Inflation: 100, Seed: 1, Staging: StagingLive})
		if !reflect.DeepEqual(def, inline) || reflect.DeepEqual(def, live) {
			t.Fatalf("%s: default %+v\ninline %+v\nlive %+v", pol, def, inline, live)
		}
		if def.Makespan != want[0] || float64(def.BytesMoved) != want[1] {
			t.Errorf("%s inline: makespan %v, moved %d; want %v, %v", pol, def.Makespan, def.BytesMoved, want[0], want[1])
		}
	}
	if _, err := Run(w, WAN, Config{Policy: "dc", Placeholders: 2, Staging: "later"}); err == nil || !strings.Contains(err.Error(), `unknown staging mode "later"`) {
		t.Errorf("bad mode: %v", err)
	}
	for _, pol := range []string{"fcfs", "dc"} {
		a, err := Run(PA(2, 300, 4), LAN, Config{Policy: pol, Placeholders: 100, Inflation: 10, Seed: 2, Staging: StagingLive})
		b, _ := Run(PA(2, 300, 4), LAN, Config{Policy: pol, Placeholders: 100, Inflation: 10, Seed: 2, Staging: StagingLive})
		if err != nil || !reflect.DeepEqual(a, b) || a.Transfers == 0 {
			t.Fatalf("%s, 100 hosts: %+v %v; again %+v", pol, a, err, b)
		}
	}
}

// BenchmarkRunLive is BenchmarkRun with live staging.
func BenchmarkRunLive(b *testing.B) {
	for _, pol := range []string{"fcfs", "dc"} {
		b.Run(pol, func(b *testing.B) {
			w := PA(1, 1000, 16)
			var events uint64
			for b.Loop() {
				r, err := Run(w, WAN, Config{Policy: pol, Placeholders: 32, Inflation: 100, Seed: 1, Staging: StagingLive})
				if err != nil {
					b.Fatal(err)
				}
				events += r.Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// TestLiveDCQueueTimeFromReadiness: live DC counts a job's queue time
// from when it became ready, as the CLS does. A parsing job ready only
// now, after its 1,000 s producer, with the producer's host asking again
// at once, waits for that host; counted from its submission, its queue
// time alone would send its 50 MB input to the other host.
func TestLiveDCQueueTimeFromReadiness(t *testing.T) {
	t.Parallel()
	fast := Platform{Name: "fast", CLSInvocation: 0.02, QueuingDelay: 0.001, SCPLatency: 0.01, SCPRate: 50e6}
	m, err := newModel(mustWorkload(t, `{"files":[],"jobs":[
		{"name":"p","runtime_s":1000,"out":[{"name":"f","bytes":50000000}]},
		{"name":"c","runtime_s":1,"in":["f"]}]}`), fast, Config{Policy: "dc", Placeholders: 2, Seed: 1, Staging: StagingLive})
	if err != nil {
		t.Fatal(err)
	}
	at0, at1 := m.hosts[0][0], m.hosts[1][0]
	if j, _ := m.chooseLive(at0); m.name(j) != "p" {
		t.Fatalf("host 0 got %s, want p", m.name(j))
	}
	m.c.now = 1000
	m.complete(m.jobNamed(t, "p"), 0)
	// Host 0's placeholder is asking now (parked), host 1's asks too.
	m.phs[at0].parked = true
	m.live.parked = append(m.live.parked, at0)
	if j, waited := m.chooseLive(at1); j >= 0 || !waited || len(m.live.xfers) != 0 {
		t.Fatalf("host 1 got %s (waited %v, %d transfers); want a wait for host 0, where f is", m.name(j), waited, len(m.live.xfers))
	}
}
