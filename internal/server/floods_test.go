package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// A connection that said hello is closed after Idle, not at the hello
// deadline: the watchdog once compared counts taken when it first ran, so
// a hello read before that closed the connection at HelloTimeout (15 s)
// where the docs say 10 minutes.
func TestIdleAfterHelloIsIdleNotHelloTimeout(t *testing.T) {
	t.Parallel()
	const hello = 200 * time.Millisecond
	srv := &Server{Store: newStore(t), Limits: Limits{HelloTimeout: hello, Idle: time.Hour}}
	var ps []*peer
	for range 20 {
		p := connect(t, srv, protocol.RoleUser)
		p.hello("")
		ps = append(ps, p)
	}
	time.Sleep(8 * hello) // several hello deadlines, far from Idle
	for i, p := range ps {
		r, _ := p.call(protocol.OpSummary.Name, nil)
		if r == nil || r.Err != nil {
			t.Fatalf("connection %d, idle %v after its hello, was closed (Idle is an hour): %+v", i, 8*hello, r)
		}
	}
}

// An SSH user or admin key does not act as a placeholder: the placeholder
// role and every placeholder op are refused, so such a key cannot be
// handed jobs or files from the CLS host (files.poll/files.pull).
func TestNoPlaceholderRole(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t), Files: noFiles{}}
	for _, role := range []string{protocol.RoleUser, protocol.RoleAdmin} {
		who := Peer{MaxRole: role, Identity: "ssh-key:SHA256:u", NoPlaceholder: true}
		p := connectAs(t, srv, who)
		r, _ := p.call(protocol.OpHello.Name, protocol.Hello{Proto: protocol.Version, Role: protocol.RolePlaceholder})
		if r.Err == nil || r.Err.Code != protocol.CodeForbidden {
			t.Fatalf("%s key: hello as placeholder: %+v, want forbidden", role, r)
		}
		p = connectAs(t, srv, who)
		p.hello("")
		p.fails(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", Slots: 1}, protocol.CodeForbidden)
		for _, op := range []string{protocol.OpNext.Name, protocol.OpReport.Name, protocol.OpHeartbeat.Name, protocol.OpOutput.Name,
			protocol.OpFilesPoll.Name, protocol.OpFilesPull.Name, protocol.OpFilesPush.Name, protocol.OpFilesDone.Name} {
			p.fails(op, map[string]any{"placeholder": 1}, protocol.CodeForbidden)
		}
		p.do(protocol.OpSummary.Name, nil, nil) // the rest of the role stays
	}
}

// A site's placeholder key registers only as its site, and no key as the
// CLS's own local site.
func TestPlaceholderKeyBoundToSite(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	grid := connectAs(t, srv, Peer{MaxRole: protocol.RolePlaceholder, Identity: "ssh-key:SHA256:g", Site: "grid"})
	grid.hello(protocol.RolePlaceholder)
	grid.fails(protocol.OpRegister.Name, protocol.Register{Site: "other", Host: "h", Slots: 1}, protocol.CodeForbidden)
	grid.fails(protocol.OpRegister.Name, protocol.Register{Site: "local", Host: "h", Slots: 1}, protocol.CodeForbidden)
	grid.do(protocol.OpRegister.Name, protocol.Register{Site: "grid", Host: "h", Slots: 1}, nil)

	manual := connectAs(t, srv, Peer{MaxRole: protocol.RolePlaceholder, Identity: "ssh-key:SHA256:m"})
	manual.hello(protocol.RolePlaceholder)
	manual.fails(protocol.OpRegister.Name, protocol.Register{Site: "local", Host: "h", Slots: 1}, protocol.CodeForbidden)
	manual.do(protocol.OpRegister.Name, protocol.Register{Site: "clusterA", Host: "h", Slots: 1}, nil)
}

// One connection registers a bounded number of placeholders; a reconnect's
// re-registration of one of them is not counted again.
func TestRegistrationsBounded(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	p := connect(t, srv, protocol.RolePlaceholder)
	p.hello(protocol.RolePlaceholder)
	var first protocol.RegisterReply
	for i := range DefaultRegistrations {
		var r protocol.RegisterReply
		p.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", Slots: 1}, &r)
		if i == 0 {
			first = r
		}
	}
	for range 100 {
		p.fails(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", Slots: 1}, protocol.CodeBusy)
	}
	p.do(protocol.OpRegister.Name, protocol.Register{ID: first.ID, Site: "s", Host: "h", Slots: 1}, nil)
}

// N refused requests from one peer make O(1) log lines that say N.
func TestRefusalsAggregated(t *testing.T) {
	t.Parallel()
	var buf syncBuf
	srv := &Server{Store: newStore(t), Log: slog.New(slog.NewTextHandler(&buf, nil)), Limits: Limits{LogWindow: time.Hour}}
	p := connect(t, srv, protocol.RolePlaceholder)
	p.hello(protocol.RolePlaceholder)
	var reg protocol.RegisterReply
	p.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", Slots: 1}, &reg)
	const n = 2000
	for range n {
		p.fails(protocol.OpStat.Name, protocol.Stat{}, protocol.CodeForbidden)
	}
	poll := protocol.Next{Placeholder: reg.ID, Free: 1, WaitMS: 60_000}
	for range DefaultNexts {
		p.send(protocol.OpNext.Name, poll)
	}
	for range n {
		p.fails(protocol.OpNext.Name, poll, protocol.CodeBusy)
	}
	srv.FlushLog()
	log := buf.String()
	if lines := strings.Count(log, "\n"); lines > 10 {
		t.Fatalf("%d refused requests made %d log lines:\n%.2000s", 2*n, lines, log)
	}
	for _, want := range []string{"more=1999", "refused request outside the placeholder role", "refused a next beyond"} {
		if !strings.Contains(log, want) {
			t.Errorf("no %q in the log:\n%s", want, log)
		}
	}
}

// noFiles serves no transfers: the refusals come first.
type noFiles struct{}

func (noFiles) Poll(context.Context, int64, time.Duration) (protocol.FileOrder, error) {
	return protocol.FileOrder{}, nil
}
func (noFiles) Pull(context.Context, protocol.FilePull) (protocol.FileData, error) {
	return protocol.FileData{}, nil
}
func (noFiles) Push(context.Context, protocol.FileChunk) error { return nil }
func (noFiles) Done(context.Context, protocol.FileDone) error  { return nil }

// Reports that need cleaning, batch after batch, leave a few log lines
// with a count, not one a batch.
func TestCleanedReportsLogBounded(t *testing.T) {
	t.Parallel()
	var buf syncBuf
	srv := &Server{Store: newStore(t), Log: slog.New(slog.NewTextHandler(&buf, nil))}
	p := connect(t, srv, protocol.RolePlaceholder)
	p.hello(protocol.RolePlaceholder)
	var reg protocol.RegisterReply
	p.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 1, OutDir: "/o"}, &reg)
	const batches = 500
	for i := range batches {
		bad := protocol.Report{ID: int64(1_000_000 + i), Attempt: 1, Exit: 1, Reason: "x\x1b[2J"}
		p.call(protocol.OpReport.Name, protocol.ReportBatch{Placeholder: reg.ID, Reports: []protocol.Report{bad}})
	}
	if n := strings.Count(buf.String(), "cleaned reports"); n == 0 || n > 5 {
		t.Fatalf("%d batches of reports to clean logged %d lines about it; want 1 to 5:\n%s", batches, n, buf.String())
	}
}

// A placeholder's body of empty objects is refused before it is decoded:
// a 4 MiB frame of {} reports once held 780 MiB of the CLS's memory. An
// agent's own largest bodies (a register holding MaxHolding attempts, a
// batch of reports) still pass, and the connection goes on.
func TestPlaceholderObjectFloodRefused(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	p := connect(t, srv, protocol.RolePlaceholder)
	p.hello(protocol.RolePlaceholder)
	holding := make([]protocol.JobRef, protocol.MaxHolding)
	for i := range holding {
		holding[i] = protocol.JobRef{ID: int64(i + 1), Attempt: 1}
	}
	var reg protocol.RegisterReply
	p.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 1, OutDir: "/o", Holding: holding}, &reg)
	reports := make([]protocol.Report, 20000)
	for i := range reports {
		reports[i] = protocol.Report{ID: int64(1_000_000 + i), Attempt: 1}
	}
	p.do(protocol.OpReport.Name, protocol.ReportBatch{Placeholder: reg.ID, Reports: reports}, nil)

	for _, op := range []string{protocol.OpReport.Name, protocol.OpNext.Name, protocol.OpRegister.Name} {
		body := `{"placeholder":` + fmt.Sprint(reg.ID) + `,"reports":[{}` + strings.Repeat(`,{}`, protocol.MaxPeerObjects) + `]}`
		p.nextID++
		p.sendLine(fmt.Sprintf(`{"id":%d,"op":%q,"body":%s}`, p.nextID, op, body))
		r := p.recv(p.nextID)
		if r.Err == nil || r.Err.Code != protocol.CodeBadRequest || !strings.Contains(r.Err.Msg, "JSON objects") {
			t.Fatalf("%s of %d objects: %+v %s, want bad_request naming the objects", op, protocol.MaxPeerObjects+2, r.Err, r.Body)
		}
	}
	p.do(protocol.OpHeartbeat.Name, protocol.Heartbeat{Placeholder: reg.ID}, nil)
}

// A report of a job stopped because others filled its placeholder's
// output disk is logged (through the limiter: once for many batches),
// naming the placeholder.
func TestDiskFullReportLogged(t *testing.T) {
	t.Parallel()
	var buf syncBuf
	srv := &Server{Store: newStore(t), Log: slog.New(slog.NewTextHandler(&buf, nil)), Limits: Limits{LogWindow: time.Hour}}
	p := connect(t, srv, protocol.RolePlaceholder)
	p.hello(protocol.RolePlaceholder)
	var reg protocol.RegisterReply
	p.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 1, OutDir: "/o"}, &reg)
	for i := range 20 {
		r := protocol.Report{ID: int64(1_000_000 + i), Attempt: 1, Exit: 143, Reason: protocol.ReasonDiskFull + " (10 bytes free)"}
		p.call(protocol.OpReport.Name, protocol.ReportBatch{Placeholder: reg.ID, Reports: []protocol.Report{r}})
	}
	if n := strings.Count(buf.String(), "output disk is nearly full"); n != 1 || !strings.Contains(buf.String(), fmt.Sprintf("placeholder=%d", reg.ID)) {
		t.Fatalf("20 batches with a job stopped for the disk logged %d lines about it; want 1 naming placeholder %d:\n%s", n, reg.ID, buf.String())
	}
}

// TestHeartbeatPaused: each heartbeat tells OnPaused whether its
// placeholder takes no new jobs for its full output disk.
func TestHeartbeatPaused(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var said []bool
	srv := &Server{Store: newStore(t), OnPaused: func(_ int64, paused bool) {
		mu.Lock()
		defer mu.Unlock()
		said = append(said, paused)
	}}
	p := connect(t, srv, protocol.RolePlaceholder)
	p.hello(protocol.RolePlaceholder)
	var reg protocol.RegisterReply
	p.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 1, OutDir: "/o"}, &reg)
	p.do(protocol.OpHeartbeat.Name, protocol.Heartbeat{Placeholder: reg.ID, Paused: true}, nil)
	p.do(protocol.OpHeartbeat.Name, protocol.Heartbeat{Placeholder: reg.ID}, nil)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(said, []bool{true, false}) {
		t.Errorf("OnPaused heard %v, want [true false]", said)
	}
}
