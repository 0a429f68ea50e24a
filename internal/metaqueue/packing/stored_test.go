package packing

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

// fakeExec records the statements packing writes.
type fakeExec struct{ execs []string }

func (f *fakeExec) ExecContext(_ context.Context, q string, args ...any) (sql.Result, error) {
	f.execs = append(f.execs, q)
	return nil, nil
}

func (f *fakeExec) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, sql.ErrConnDone
}

func (f *fakeExec) QueryRowContext(context.Context, string, ...any) *sql.Row { return nil }

// fakeJobs is the core's jobs as packing reads them.
type fakeJobs struct{ running []Held }

func (f fakeJobs) Category(id int64) (resource.Category, bool) {
	return resource.Category{Queue: "q", Target: "t"}, true
}
func (f fakeJobs) Running() []Held { return f.running }

// An attempt's end is one call: it learns from a measured success, raises
// a memory-killed job's request once (stored), and gives the grant back.
func TestEnded(t *testing.T) {
	for _, c := range []struct {
		name      string
		req       resource.Request
		end       End
		retry     bool
		writes    int
		wantMemGB int64
	}{
		{"done, fixed size", resource.Request{CPUs: 2, Mem: gib}, End{Succeeded: true, Usage: protocol.Usage{MaxRSS: gib}}, false, 0, 1},
		{"done, auto memory", resource.Request{CPUs: 1, AutoMem: true}, End{Succeeded: true, Usage: protocol.Usage{MaxRSS: 2 * gib}, Elapsed: time.Minute}, false, 0, 0},
		{"killed for memory", resource.Request{CPUs: 1, Mem: gib}, End{Failed: true, Reason: protocol.ReasonMemory}, true, 1, 2},
		{"failed otherwise", resource.Request{CPUs: 1, Mem: gib}, End{Failed: true, Reason: "exit status 1"}, false, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New()
			if err := p.Placeholder(1, resource.Capacity{CPUs: 4, Mem: 8 * gib}); err != nil {
				t.Fatal(err)
			}
			cat := resource.Category{Queue: "q", Target: "t"}
			p.Job(10, c.req, cat)
			ru := Run{Job: 10, Attempt: 1}
			if _, ok := p.Grant(ru, 1); !ok {
				t.Fatal("Grant refused")
			}
			e := c.end
			e.Run, e.Category = ru, cat
			x := &fakeExec{}
			retry, err := p.Ended(context.Background(), x, e)
			if err != nil || retry != c.retry {
				t.Fatalf("Ended: retry %v, %v; want %v", retry, err, c.retry)
			}
			if len(x.execs) != c.writes {
				t.Errorf("%d writes, want %d", len(x.execs), c.writes)
			}
			if got := p.Request(10).Mem / gib; c.wantMemGB > 0 && got != c.wantMemGB {
				t.Errorf("request %d GiB, want %d", got, c.wantMemGB)
			}
			if _, held := p.grants[ru]; held {
				t.Error("the grant was not given back")
			}
			if free, _ := p.Free(1); free.CPUs != 4 {
				t.Errorf("free %d cores after the end, want 4", free.CPUs)
			}
		})
	}
}

// A bundle's attempt that ends while another member runs on in its grant
// passes the grant on: the pool gets nothing back until the heir ends.
func TestEndedPassesToHeir(t *testing.T) {
	p := New()
	if err := p.Placeholder(1, resource.Capacity{CPUs: 4, Mem: 8 * gib}); err != nil {
		t.Fatal(err)
	}
	cat := resource.Category{Queue: "q", Target: "t"}
	p.Job(10, resource.Request{CPUs: 2}, cat)
	first, heir := Run{Job: 10, Attempt: 1}, Run{Job: 11, Attempt: 1}
	if _, ok := p.Grant(first, 1); !ok {
		t.Fatal("Grant refused")
	}
	for _, c := range []struct {
		end      End
		freeCPUs int
	}{
		{End{Run: first, Category: cat, Succeeded: true, Heir: &heir}, 2},
		{End{Run: heir, Category: cat, Succeeded: true}, 4},
	} {
		if _, err := p.Ended(context.Background(), &fakeExec{}, c.end); err != nil {
			t.Fatal(err)
		}
		if free, _ := p.Free(1); free.CPUs != c.freeCPUs {
			t.Errorf("after job %d ended: %d cores free, want %d", c.end.Run.Job, free.CPUs, c.freeCPUs)
		}
	}
}

// Register makes a pool once and takes again what the placeholder's
// running attempts hold; Grant says nil for a job that asks for nothing.
func TestRegisterAndGrant(t *testing.T) {
	p := New()
	p.Job(5, resource.Request{CPUs: 2}, resource.Category{})
	jobs := fakeJobs{running: []Held{{Run{5, 1}, 1}, {Run{6, 1}, 2}}}
	for _, c := range []struct {
		name string
		ph   int64
		cap  *protocol.Capacity
		pool bool
	}{
		{"no capacity: slots", 3, nil, false},
		{"a capacity", 1, &protocol.Capacity{CPUs: 4}, true},
		{"again: kept", 1, &protocol.Capacity{CPUs: 8}, true},
	} {
		if err := p.Register(c.ph, c.cap, 1, jobs); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if p.Has(c.ph) != c.pool {
			t.Errorf("%s: pool %v, want %v", c.name, p.Has(c.ph), c.pool)
		}
	}
	if free, _ := p.Free(1); free.CPUs != 2 {
		t.Errorf("free %d cores, want 2 (its running 2-core attempt retaken, the second register ignored)", free.CPUs)
	}
	for _, c := range []struct {
		id    int64
		grant bool
	}{{7, false}, {5, true}} {
		if c.id == 5 {
			p.Stop(Run{5, 1})
		}
		g, ok := p.Grant(Run{c.id, 2}, 1)
		if !ok || (g != nil) != c.grant {
			t.Errorf("job %d's grant %+v, %v; want one: %v", c.id, g, ok, c.grant)
		}
	}
}

// The submit warnings: one line per reason, ids as ranges, at most five.
func TestUnholdables(t *testing.T) {
	p := New()
	if err := p.Placeholder(1, resource.Capacity{CPUs: 4, Mem: 8 * gib}); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 3; id++ {
		p.Job(id, resource.Request{CPUs: 8}, resource.Category{})
	}
	p.Job(4, resource.Request{CPUs: 2}, resource.Category{})
	p.Job(5, resource.Request{CPUs: 8}, resource.Category{})
	for i := int64(0); i < 6; i++ {
		p.Job(10+i, resource.Request{CPUs: 1, Mem: (20 + i) * gib}, resource.Category{})
	}
	for _, c := range []struct {
		first int64
		n     int
		want  []string
	}{
		{4, 1, nil},
		{1, 3, []string{"jobs 1-3 wait: " + p.Why(1) + " (a site that holds it may be added)"}},
		{1, 5, []string{"4 jobs from 1 to 5 wait: " + p.Why(1) + " (a site that holds it may be added)"}},
		{5, 1, []string{"job 5 waits: " + p.Why(5) + " (a site that holds it may be added)"}},
	} {
		if got := p.Unholdables(c.first, c.n, noNeed); !slices.Equal(got, c.want) {
			t.Errorf("Unholdables(%d, %d) = %q, want %q", c.first, c.n, got, c.want)
		}
	}
	got := p.Unholdables(10, 6, noNeed)
	if len(got) != maxUnholdableLines+1 || got[maxUnholdableLines] != "and 1 more reasons jobs wait for a placeholder that can hold them" {
		t.Errorf("six reasons: %q", got)
	}
}

// TestAlterNamed: mqalter's named amounts replace or join a job's, its
// drops remove them (a name the job lacks is no error), and a request left
// with none has no map at all, as one submitted without.
func TestAlterNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		old, set  map[string]int
		drop      []string
		want      map[string]int
		wantNoMap bool
	}{
		{"replaced and joined", map[string]int{"lic": 2, "scratch": 5}, map[string]int{"lic": 1, "fpga": 1}, nil,
			map[string]int{"lic": 1, "scratch": 5, "fpga": 1}, false},
		{"dropped, one the job lacks", map[string]int{"lic": 2, "scratch": 5}, nil, []string{"scratch", "nosuch", protocol.DropGPUs},
			map[string]int{"lic": 2}, false},
		{"all dropped", map[string]int{"lic": 2}, nil, []string{"lic"}, nil, true},
		{"none before, none given", nil, nil, nil, nil, true},
	} {
		got := alterNamed(tc.old, tc.set, tc.drop)
		if !maps.Equal(got, tc.want) || (got == nil) != tc.wantNoMap {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
