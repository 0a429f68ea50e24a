//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPlanFollowed plans a DAG over two local sites (the embedded one and
// a second local site) with HEFT, with LPSched (seed 001) and with the
// list search, and runs
// it: every job the plan placed before it started runs at its planned
// site, `cls plan show` counts them as followed and `mqstat -j` says so.
// Planning refuses bad input with one-line errors.
func TestPlanFollowed(t *testing.T) {
	for _, planner := range []string{"heft", "lp", "list"} {
		t.Run(planner, func(t *testing.T) { testPlanFollowed(t, planner) })
	}
}

func testPlanFollowed(t *testing.T, planner string) {
	h := newHarness(t)
	h.startCLS("--local", "0", "--lease", "10s")
	for _, s := range []string{"a", "b"} {
		h.ok("cls", "site", "add", s, "--type", "local", "--min", "1", "--max", "1", "--slots", "2")
	}

	// Everything waits on a gate, so the plan is in force before any
	// planned job can start; the gate is work, so both sites start their
	// placeholders.
	// Three gate jobs: more than one site's two slots, so both start a
	// placeholder.
	for range 3 {
		h.submit("gate", "while [ ! -e "+filepath.Join(h.dir, "go")+" ]; do sleep 0.05; done")
	}
	waitFor(t, 60*time.Second, func() error {
		var sl struct {
			Sites []struct {
				Name      string `json:"name"`
				Connected int    `json:"connected"`
			} `json:"sites"`
		}
		if err := json.Unmarshal([]byte(h.ok("cls", "site", "list", "--json")), &sl); err != nil {
			return err
		}
		for _, s := range sl.Sites {
			if s.Connected == 0 {
				return fmt.Errorf("site %s has no placeholder connected yet", s.Name)
			}
		}
		return nil
	})
	var ids []int64
	for i := range 6 {
		ids = append(ids, h.submit("-p", "gate", "--est", "1", fmt.Sprintf("a%d", i), fmt.Sprintf("echo %d > %s/a%d.out", i, h.dir, i)))
	}
	ids = append(ids, h.submit("-p", "a0", "-p", "a1", "-p", "a2", "-p", "a3", "-p", "a4", "-p", "a5", "--est", "1", "z", "cat "+h.dir+"/a*.out"))

	out := h.ok("cls", "plan", "make", "z", "--planner", planner)
	if !strings.Contains(out, "planned 10 jobs") || !strings.Contains(out, planner) {
		t.Fatalf("cls plan make printed:\n%s", out)
	}
	checkPlanTimeline(t, h, planner, ids)
	if err := os.WriteFile(filepath.Join(h.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if d := h.waitState(id, "DFB", 90*time.Second); d.State != "D" {
			t.Fatalf("job %d ended %s", id, d.State)
		}
	}
	for _, id := range ids {
		out := h.ok("mqstat", "-j", fmt.Sprint(id))
		if !strings.Contains(out, "plan:") || !strings.Contains(out, "("+planner+", #") || !strings.Contains(out, ", followed") {
			t.Errorf("mqstat -j %d does not show a followed plan:\n%s", id, out)
		}
	}
	var show struct {
		Sites []struct {
			Site    string `json:"site"`
			Jobs    int    `json:"jobs"`
			RanHere int    `json:"ran_here"`
		} `json:"sites"`
	}
	raw := h.ok("cls", "plan", "show", "--json")
	if err := json.Unmarshal([]byte(raw), &show); err != nil {
		t.Fatalf("cls plan show --json: %v\n%s", err, raw)
	}
	total, here := 0, 0
	for _, s := range show.Sites {
		total += s.Jobs
		here += s.RanHere
	}
	// The gates ran before the plan was made, wherever they ran.
	if total != 10 || here < 7 {
		t.Fatalf("cls plan show: %d jobs planned, %d ran at their planned site; want 10 and at least 7\n%s", total, here, raw)
	}
	if out := h.ok("cls", "plan", "clear"); !strings.Contains(out, "10 jobs") {
		t.Fatalf("cls plan clear printed %q", out)
	}

	// Runtimes are learned from the accounting: echo jobs ran at both
	// sites, so a new echo job's runtimes come from there, not from --est;
	// --no-learn and --site-speed go back to the assumed runtime over the
	// given speeds.
	// w waits on hold, which waits on a file, so w stays to be planned.
	hold := h.submit("hold", "while [ ! -e "+filepath.Join(h.dir, "go2")+" ]; do sleep 0.05; done")
	w := h.submit("-p", "hold", "w", "echo w")
	var sum struct {
		Estimates map[string]int `json:"estimates"`
		Sites     []struct {
			Site  string  `json:"site"`
			Speed float64 `json:"speed"`
		} `json:"sites"`
		MakespanS float64 `json:"makespan_s"`
	}
	raw = h.ok("cls", "plan", "make", "w", "--json", "--est", "1h")
	if err := json.Unmarshal([]byte(raw), &sum); err != nil || sum.Estimates["site"]+sum.Estimates["class"] != 2 || sum.MakespanS > 600 {
		t.Fatalf("plan of an echo job after echo jobs ran: %v\n%s", err, raw)
	}
	raw = h.ok("cls", "plan", "make", "w", "--json", "--est", "1h", "--no-learn", "--site-speed", "a=2,b=2")
	if err := json.Unmarshal([]byte(raw), &sum); err != nil || sum.Estimates["default"] != 2 || sum.MakespanS != 3600 || sum.Sites[0].Speed != 2 {
		t.Fatalf("plan with --no-learn --site-speed a=2,b=2 --est 1h: %v\n%s", err, raw)
	}
	h.ok("cls", "plan", "clear")
	if err := os.WriteFile(filepath.Join(h.dir, "go2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{hold, w} {
		if d := h.waitState(id, "DFB", 90*time.Second); d.State != "D" {
			t.Fatalf("job %d ended %s", id, d.State)
		}
	}

	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"plan", "make"}, 2},
		{[]string{"plan", "make", "z", "--planner", "nope"}, 2},
		{[]string{"plan", "make", "z", "--time-limit", "0s"}, 2},
		{[]string{"plan", "make", "z", "--site-speed", "a=0"}, 2},
		{[]string{"plan", "make", "z", "--site-speed", "a"}, 2},
		{[]string{"plan", "show", "extra"}, 2},
		{[]string{"plan", "show", "--limit", "-1"}, 2},
		{[]string{"plan", "show", "--limit", "x"}, 2},
		{[]string{"plan", "make", "nosuch"}, 1},
		{[]string{"plan", "make", "z"}, 1}, // ended: nothing left to plan
	} {
		r := h.run("cls", tc.args...)
		if r.code != tc.code {
			t.Errorf("cls %s: exit %d, want %d: %s", strings.Join(tc.args, " "), r.code, tc.code, r.stderr)
		}
		oneLineErr(t, "cls", r)
	}
}

// checkPlanTimeline: `cls plan show` explains the plan just made: its
// timeline lists each planned job once, at the site and in the order the
// plan runs it (a site's jobs by start, no two on a slot at once, z after
// every a, the a jobs after the gates), predicts the makespan as its last
// end, and the text prints each site's jobs in that order, bounded by
// --limit with the rest counted.
func checkPlanTimeline(t *testing.T, h *harness, planner string, ids []int64) {
	t.Helper()
	var show struct {
		Plans []struct {
			Target    string  `json:"target"`
			Planner   string  `json:"planner"`
			Jobs      int     `json:"jobs"`
			MakespanS float64 `json:"makespan_s"`
			Sites     []struct {
				Site     string  `json:"site"`
				Slots    int     `json:"slots"`
				Jobs     int     `json:"jobs"`
				BusyS    float64 `json:"busy_s"`
				Util     float64 `json:"utilisation"`
				More     int     `json:"more"`
				Timeline []struct {
					ID     int64   `json:"id"`
					Target string  `json:"target"`
					Slot   int     `json:"slot"`
					StartS float64 `json:"start_s"`
					EndS   float64 `json:"end_s"`
				} `json:"timeline"`
			} `json:"sites"`
		} `json:"plans"`
	}
	raw := h.ok("cls", "plan", "show", "--json", "--limit", "0")
	if err := json.Unmarshal([]byte(raw), &show); err != nil || len(show.Plans) != 1 {
		t.Fatalf("cls plan show --json: %v\n%s", err, raw)
	}
	p := show.Plans[0]
	if p.Target != "z" || p.Planner != planner || p.Jobs != 10 || len(p.Sites) != 2 {
		t.Fatalf("cls plan show: plan %+v", p)
	}
	type span struct {
		site         string
		start, end   float64
		target, text string
	}
	at := map[int64]span{}
	last := 0.0
	text := h.ok("cls", "plan", "show")
	for _, s := range p.Sites {
		busy, free := 0.0, map[int]float64{}
		if s.Jobs != len(s.Timeline) || s.More != 0 || s.Slots != 2 {
			t.Fatalf("site %s: %d jobs, %d listed, %d more, %d slots\n%s", s.Site, s.Jobs, len(s.Timeline), s.More, s.Slots, raw)
		}
		var lines []string
		for k, j := range s.Timeline {
			if _, dup := at[j.ID]; dup {
				t.Fatalf("job %d listed twice\n%s", j.ID, raw)
			}
			if k > 0 && j.StartS < s.Timeline[k-1].StartS {
				t.Fatalf("site %s: job %d starts before the one listed ahead of it\n%s", s.Site, j.ID, raw)
			}
			if j.Slot < 0 || j.Slot >= s.Slots || j.StartS < free[j.Slot]-1e-6 || j.EndS < j.StartS {
				t.Fatalf("site %s: job %d on slot %d from %v to %v, the slot busy until %v\n%s", s.Site, j.ID, j.Slot, j.StartS, j.EndS, free[j.Slot], raw)
			}
			free[j.Slot] = j.EndS
			busy += j.EndS - j.StartS
			last = max(last, j.EndS)
			at[j.ID] = span{site: s.Site, start: j.StartS, end: j.EndS, target: j.Target}
			lines = append(lines, fmt.Sprintf("%.1f  %.1f  %d  %d  %s", j.StartS, j.EndS, j.Slot, j.ID, j.Target))
		}
		if d := busy - s.BusyS; d > 1e-6 || d < -1e-6 || (p.MakespanS > 0 && abs(s.Util-busy/(2*p.MakespanS)) > 1e-6) {
			t.Fatalf("site %s: busy %v, utilisation %v; the timeline adds up to %v\n%s", s.Site, s.BusyS, s.Util, busy, raw)
		}
		// The text lists the same jobs in the same order (columns
		// aligned with two or more spaces).
		head := "site " + s.Site + ", in predicted start order:"
		i := strings.Index(text, head)
		if i < 0 {
			t.Fatalf("cls plan show does not show site %s's timeline:\n%s", s.Site, text)
		}
		rest := strings.Split(text[i+len(head):], "\n")[2:]
		for k, want := range lines {
			if got := strings.Join(strings.Fields(rest[k]), "  "); !strings.HasPrefix(got, want) {
				t.Fatalf("cls plan show, site %s line %d: %q, want %q...\n%s", s.Site, k, got, want, text)
			}
		}
	}
	if len(at) != 10 || abs(last-p.MakespanS) > 1e-6 {
		t.Fatalf("the timelines list %d jobs ending at %v; the plan has 10 and makespan %v\n%s", len(at), last, p.MakespanS, raw)
	}
	for _, id := range ids {
		if at[id].target == "z" {
			for _, a := range at {
				if strings.HasPrefix(a.target, "a") && a.end > at[id].start+1e-6 {
					t.Fatalf("z starts at %v before %s ends at %v\n%s", at[id].start, a.target, a.end, raw)
				}
			}
		}
	}
	for _, a := range at {
		for _, g := range at {
			if strings.HasPrefix(a.target, "a") && g.target == "gate" && g.end > a.start+1e-6 {
				t.Fatalf("%s starts at %v before a gate ends at %v\n%s", a.target, a.start, g.end, raw)
			}
		}
	}
	// Bounded: one job per site, the rest counted.
	if out := h.ok("cls", "plan", "show", "--limit", "1"); !strings.Contains(out, "more (--limit N lists more, up to what one reply holds)") || !strings.Contains(out, "predicted makespan") {
		t.Fatalf("cls plan show --limit 1:\n%s", out)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
