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
// a second local site) with HEFT, and with LPSched (seed 001), and runs
// it: every job the plan placed before it started runs at its planned
// site, `cls plan show` counts them as followed and `mqstat -j` says so.
// Planning refuses bad input with one-line errors.
func TestPlanFollowed(t *testing.T) {
	for _, planner := range []string{"heft", "lp"} {
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
		ids = append(ids, h.submit("-p", "gate", "-e", "1", fmt.Sprintf("a%d", i), fmt.Sprintf("echo %d > %s/a%d.out", i, h.dir, i)))
	}
	ids = append(ids, h.submit("-p", "a0", "-p", "a1", "-p", "a2", "-p", "a3", "-p", "a4", "-p", "a5", "-e", "1", "z", "cat "+h.dir+"/a*.out"))

	out := h.ok("cls", "plan", "make", "z", "--planner", planner)
	if !strings.Contains(out, "planned 10 jobs") || !strings.Contains(out, planner) {
		t.Fatalf("cls plan make printed:\n%s", out)
	}
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

	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"plan", "make"}, 2},
		{[]string{"plan", "make", "z", "--planner", "nope"}, 2},
		{[]string{"plan", "make", "z", "--time-limit", "0s"}, 2},
		{[]string{"plan", "show", "extra"}, 2},
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
