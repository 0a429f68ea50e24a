package metaqueue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

func (e *env) placeholderRows() int {
	e.t.Helper()
	var n int
	if err := e.s.rdb.QueryRow("SELECT count(*) FROM placeholders").Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// The rows of placeholders gone for good (disconnected for over a lease,
// never handed work) are deleted; one still connected, one that ran a
// job, and one that reconnects within the lease keep theirs. Rows of an
// earlier run that ran nothing go a lease after the store opens unless
// they register again.
func TestPlaceholderRowsSwept(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const flood = 500
	for range flood {
		id := e.register("s")
		if err := e.s.PlaceholderDisconnected(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	connected := e.register("s")
	worker := e.register("s")
	e.submit1("t", "true")
	as := e.next(worker, 1)
	if len(as) != 1 {
		t.Fatalf("worker got %d jobs", len(as))
	}
	e.next(worker, 1, ok(as[0]))
	e.s.PlaceholderDisconnected(ctx, worker)
	back := e.register("s")
	e.s.PlaceholderDisconnected(ctx, back)
	if n := e.placeholderRows(); n != flood+3 {
		t.Fatalf("%d rows before the sweep, want %d", n, flood+3)
	}
	e.advance(testLease / 2)
	if _, err := e.s.Register(ctx, registerAgain(back)); err != nil {
		t.Fatal(err)
	}
	e.advance(2 * testLease)
	if n := e.placeholderRows(); n != 3 {
		t.Fatalf("%d rows after the sweep, want 3 (connected, worker, back)", n)
	}
	e.check()
	if r, err := e.s.Heartbeat(ctx, heartbeat(connected)); err != nil {
		t.Fatalf("a connected placeholder lost its place: %v %+v", err, r)
	}

	// Across a restart: the one connected before registers again; the
	// worker's row stays for its job's history; back (no longer
	// registered anywhere after the restart) goes.
	e.reopen()
	if _, err := e.s.Register(ctx, registerAgain(connected)); err != nil {
		t.Fatal(err)
	}
	e.advance(2 * testLease)
	if n := e.placeholderRows(); n != 2 {
		t.Fatalf("%d rows after a restart's sweep, want 2 (connected, worker)", n)
	}
	if d := e.job(as[0].ID); d.Host != "h-s" || d.Site != "s" {
		t.Fatalf("the job lost where it ran: site %q host %q", d.Site, d.Host)
	}
}

func registerAgain(id int64) protocol.Register {
	return protocol.Register{ID: id, Site: "s", Host: "h-s", PID: 42, Slots: 4, OutDir: "/out/s"}
}

func heartbeat(id int64) protocol.Heartbeat { return protocol.Heartbeat{Placeholder: id} }

// A key registering under endless site names leaves the deadline check's
// candidates no longer for it: the sites only swept placeholders held
// are forgotten as more register, and a live placeholder's stays.
func TestSweptPlaceholdersSitesForgotten(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.register("kept")
	const round = 400
	for r := range 3 {
		for i := range round {
			id := e.register(fmt.Sprintf("r%d-%d", r, i))
			if err := e.s.PlaceholderDisconnected(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		e.advance(2 * testLease)
	}
	var sites []string
	places := 0
	if err := e.s.do(ctx, func() error { sites, places = e.s.ledger.Sites(), e.s.data.Places(); return nil }); err != nil {
		t.Fatal(err)
	}
	if places > 10 {
		t.Errorf("%d places numbered after 1,200 placeholders registered under names of their own and swept", places)
	}
	if !slices.Contains(sites, "kept") {
		t.Errorf("the site of a connected placeholder was forgotten")
	}
	for _, site := range sites {
		if strings.HasPrefix(site, "r0-") {
			t.Fatalf("%d sites known, %q among them, though its placeholder was swept two rounds ago", len(sites), site)
		}
	}
}

// Placeholders swept leave nothing of theirs in packing as more register,
// and their ids are not given again in the run.
func TestSweptPlaceholdersPacking(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	given := map[int64]bool{}
	var first []int64
	const round = 300
	for r := range 3 {
		for range round {
			reply, err := e.s.Register(ctx, protocol.Register{Site: "s", Host: "h-s", PID: 42, Slots: 4, OutDir: "/out/s", Capacity: &protocol.Capacity{CPUs: 4}})
			if err != nil {
				t.Fatal(err)
			}
			if given[reply.ID] {
				t.Fatalf("id %d given again after its placeholder was swept", reply.ID)
			}
			given[reply.ID] = true
			if r == 0 {
				first = append(first, reply.ID)
			}
			if err := e.s.PlaceholderDisconnected(ctx, reply.ID); err != nil {
				t.Fatal(err)
			}
		}
		e.advance(2 * testLease)
	}
	if err := e.s.do(ctx, func() error {
		for _, id := range first {
			if e.s.pack.Has(id) {
				t.Errorf("packing still holds placeholder %d, swept two rounds ago", id)
				break
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A placeholder registered after a restart never gets the id of one swept
// before it, though SQLite would give the highest remaining row's id plus
// one: the server names its stream copies by that id.
func TestSweptIDNotGivenAfterRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.register("s")
	gone := e.register("s")
	if err := e.s.PlaceholderDisconnected(ctx, gone); err != nil {
		t.Fatal(err)
	}
	e.advance(2 * testLease)
	if n := e.placeholderRows(); n != 1 {
		t.Fatalf("%d rows after the sweep, want 1", n)
	}
	e.reopen()
	if id := e.register("s"); id <= gone {
		t.Fatalf("after a restart a new placeholder got id %d, not above the swept %d", id, gone)
	}
}
