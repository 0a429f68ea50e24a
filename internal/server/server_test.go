package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/protocol"
)

// patience bounds waits for what must happen: generous, since under the
// race detector on a loaded machine a 4 MB frame alone can take over 10 s
// to cross a pipe.
const patience = 2 * time.Minute

func newStore(t testing.TB) *metaqueue.Store {
	t.Helper()
	s, err := metaqueue.Open(context.Background(), metaqueue.Options{
		Path: filepath.Join(t.TempDir(), "mq.db"), Sync: metaqueue.SyncNormal, Lease: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// peer is the client end of a connection served by ServeConn over
// net.Pipe. A goroutine reads every response so the server never blocks.
type peer struct {
	t      testing.TB
	c      net.Conn
	resps  chan *protocol.Response
	raw    chan []byte // every line read, for protocol checks
	served chan struct{}
	nextID uint64
	held   map[uint64][]*protocol.Response
}

func connect(t testing.TB, srv *Server, maxRole string) *peer {
	t.Helper()
	return connectAs(t, srv, Peer{MaxRole: maxRole, Identity: "socket"})
}

func connectAs(t testing.TB, srv *Server, who Peer) *peer {
	t.Helper()
	cli, sc := net.Pipe()
	p := &peer{t: t, c: cli, resps: make(chan *protocol.Response, 1024), raw: make(chan []byte, 1024),
		served: make(chan struct{}), nextID: 100, held: map[uint64][]*protocol.Response{}}
	go func() {
		defer close(p.served)
		srv.ServePeer(context.Background(), sc, who)
	}()
	go func() {
		defer close(p.resps)
		r := protocol.NewReader(cli)
		for {
			line, err := r.ReadLine()
			if err != nil {
				return
			}
			select {
			case p.raw <- append([]byte(nil), line...):
			default:
			}
			var resp protocol.Response
			if err := json.Unmarshal(line, &resp); err != nil {
				t.Errorf("server sent a malformed frame %q: %v", line, err)
				return
			}
			p.resps <- &resp
		}
	}()
	t.Cleanup(func() {
		cli.Close()
		select {
		case <-p.served:
		case <-time.After(patience):
			t.Error("ServeConn did not return after the peer closed")
		}
	})
	return p
}

func (p *peer) sendLine(line string) {
	p.t.Helper()
	p.c.SetWriteDeadline(time.Now().Add(patience))
	if _, err := io.WriteString(p.c, line+"\n"); err != nil {
		p.t.Fatalf("write: %v", err)
	}
}

func (p *peer) send(op string, body any) uint64 {
	p.t.Helper()
	p.nextID++
	req := protocol.Request{ID: p.nextID, Op: op}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			p.t.Fatal(err)
		}
		req.Body = b
	}
	b, err := json.Marshal(req)
	if err != nil {
		p.t.Fatal(err)
	}
	p.sendLine(string(b))
	return p.nextID
}

// recv returns the next response for id (streamed frames included).
func (p *peer) recv(id uint64) *protocol.Response {
	p.t.Helper()
	if h := p.held[id]; len(h) > 0 {
		p.held[id] = h[1:]
		return h[0]
	}
	timeout := time.After(patience)
	for {
		select {
		case r, ok := <-p.resps:
			if !ok {
				p.t.Fatalf("connection closed waiting for reply %d", id)
			}
			if r.ID == id {
				return r
			}
			p.held[r.ID] = append(p.held[r.ID], r)
		case <-timeout:
			p.t.Fatalf("no reply to request %d", id)
		}
	}
}

// call sends a request and returns its final response, with the bodies of
// streamed frames before it.
func (p *peer) call(op string, body any) (*protocol.Response, []json.RawMessage) {
	p.t.Helper()
	id := p.send(op, body)
	var stream []json.RawMessage
	for {
		r := p.recv(id)
		if r.More {
			stream = append(stream, r.Body)
			continue
		}
		return r, stream
	}
}

// do calls and decodes a successful reply into out.
func (p *peer) do(op string, body, out any) {
	p.t.Helper()
	r, _ := p.call(op, body)
	if r.Err != nil {
		p.t.Fatalf("%s: %s: %s", op, r.Err.Code, r.Err.Msg)
	}
	if out != nil {
		if err := json.Unmarshal(r.Body, out); err != nil {
			p.t.Fatalf("%s: decode %s: %v", op, r.Body, err)
		}
	}
}

func (p *peer) fails(op string, body any, code string) *protocol.Error {
	p.t.Helper()
	r, _ := p.call(op, body)
	if r.Err == nil {
		p.t.Fatalf("%s succeeded, want %s: %s", op, code, r.Body)
	}
	if r.Err.Code != code {
		p.t.Fatalf("%s: error %s (%s), want %s", op, r.Err.Code, r.Err.Msg, code)
	}
	if strings.Contains(r.Err.Msg, "\n") {
		p.t.Fatalf("error message %q is not one line", r.Err.Msg)
	}
	return r.Err
}

func (p *peer) hello(role string) protocol.HelloReply {
	p.t.Helper()
	var h protocol.HelloReply
	p.do(protocol.OpHello.Name, protocol.Hello{Proto: protocol.Version, Role: role, Client: "test"}, &h)
	return h
}

// closed waits until the server has closed the connection.
func (p *peer) closed() {
	p.t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case _, ok := <-p.resps:
			if !ok {
				return
			}
		case <-timeout:
			p.t.Fatal("server did not close the connection")
		}
	}
}

func TestHelloRequiredFirst(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	for _, op := range []string{protocol.OpStat.Name, protocol.OpSubmit.Name, protocol.OpRegister.Name, "nonsense"} {
		p := connect(t, srv, protocol.RoleUser)
		e := p.fails(op, struct{}{}, protocol.CodeBadRequest)
		if !strings.Contains(e.Msg, "first request must be hello") {
			t.Fatalf("%s before hello: %q", op, e.Msg)
		}
		p.closed()
	}
}

func TestHelloVersionAndRoles(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t), Version: "v-test"}
	tests := []struct {
		name     string
		maxRole  string
		hello    string // raw body
		code     string // "" = accepted
		wantRole string
	}{
		{"user default", protocol.RoleUser, `{"proto":1}`, "", protocol.RoleUser},
		{"user explicit", protocol.RoleUser, `{"proto":1,"role":"user"}`, "", protocol.RoleUser},
		{"user narrows", protocol.RoleUser, `{"proto":1,"role":"placeholder"}`, "", protocol.RolePlaceholder},
		{"placeholder default", protocol.RolePlaceholder, `{"proto":1}`, "", protocol.RolePlaceholder},
		{"placeholder cannot widen", protocol.RolePlaceholder, `{"proto":1,"role":"user"}`, protocol.CodeForbidden, ""},
		{"user cannot widen to admin", protocol.RoleUser, `{"proto":1,"role":"admin"}`, protocol.CodeForbidden, ""},
		{"admin default", protocol.RoleAdmin, `{"proto":1}`, "", protocol.RoleAdmin},
		{"admin narrows to user", protocol.RoleAdmin, `{"proto":1,"role":"user"}`, "", protocol.RoleUser},
		{"admin narrows to placeholder", protocol.RoleAdmin, `{"proto":1,"role":"placeholder"}`, "", protocol.RolePlaceholder},
		{"unknown role", protocol.RoleAdmin, `{"proto":1,"role":"root"}`, protocol.CodeForbidden, ""},
		{"old version", protocol.RoleUser, `{"proto":0}`, protocol.CodeUnsupported, ""},
		{"new version", protocol.RoleUser, `{"proto":2}`, protocol.CodeUnsupported, ""},
		{"no body", protocol.RoleUser, ``, protocol.CodeUnsupported, ""},
		{"bad body", protocol.RoleUser, `{"proto":"one"}`, protocol.CodeBadRequest, ""},
		{"body not an object", protocol.RoleUser, `[1]`, protocol.CodeBadRequest, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := connect(t, srv, tc.maxRole)
			line := `{"id":1,"op":"hello"}`
			if tc.hello != "" {
				line = `{"id":1,"op":"hello","body":` + tc.hello + `}`
			}
			p.sendLine(line)
			r := p.recv(1)
			if tc.code != "" {
				if r.Err == nil || r.Err.Code != tc.code {
					t.Fatalf("hello %s: %+v, want %s", tc.hello, r, tc.code)
				}
				p.closed()
				return
			}
			var h protocol.HelloReply
			if r.Err != nil || json.Unmarshal(r.Body, &h) != nil {
				t.Fatalf("hello refused: %+v", r.Err)
			}
			if h.Proto != protocol.Version || h.Role != tc.wantRole || h.Server != "v-test" {
				t.Fatalf("HelloReply %+v", h)
			}
			// A second hello is refused but the connection stays.
			p.fails(protocol.OpHello.Name, protocol.Hello{Proto: 1}, protocol.CodeBadRequest)
			p.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", Slots: 1}, nil)
		})
	}
}

func TestPlaceholderRole(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	srv := &Server{Store: st}
	user := connect(t, srv, protocol.RoleUser)
	user.hello("")
	var sub protocol.SubmitReply
	user.do(protocol.OpSubmit.Name, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "t", Command: "true"}}}, &sub)

	for _, maxRole := range []string{protocol.RolePlaceholder, protocol.RoleUser} {
		p := connect(t, srv, maxRole)
		p.hello(protocol.RolePlaceholder)
		for _, op := range []string{
			protocol.OpSubmit.Name, protocol.OpDelete.Name, protocol.OpStat.Name, protocol.OpRerun.Name, protocol.OpSummary.Name, protocol.OpJob.Name,
			protocol.OpWait.Name, protocol.OpQueueList.Name, protocol.OpQueueSet.Name, protocol.OpBulkAdd.Name, protocol.OpBulkCommit.Name,
			protocol.OpBulkAbort.Name, "no.such.op",
		} {
			e := p.fails(op, json.RawMessage(`{"ids":[1],"jobs":[{"target":"x","command":"y"}]}`), protocol.CodeForbidden)
			if !strings.Contains(e.Msg, "placeholder may not") {
				t.Fatalf("%s: %q", op, e.Msg)
			}
		}
		// Nothing was submitted or deleted through the placeholder.
		var sum protocol.SummaryReply
		user.do(protocol.OpSummary.Name, nil, &sum)
		if len(sum.Queues) != 1 || sum.Queues[0].Counts["Q"]+sum.Queues[0].Counts["E"]+sum.Queues[0].Counts["D"] != 1 {
			t.Fatalf("summary after refused ops: %+v", sum)
		}
		// The placeholder ops work.
		var reg protocol.RegisterReply
		p.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 2, OutDir: "/o"}, &reg)
		if reg.ID <= 0 || reg.LeaseS != 30 {
			t.Fatalf("RegisterReply %+v", reg)
		}
		var next protocol.NextReply
		p.do(protocol.OpNext.Name, protocol.Next{Placeholder: reg.ID, Free: 1}, &next)
		var hb protocol.HeartbeatReply
		var running []protocol.JobRef
		for _, a := range next.Jobs {
			running = append(running, protocol.JobRef{ID: a.ID, Attempt: a.Attempt})
		}
		p.do(protocol.OpHeartbeat.Name, protocol.Heartbeat{Placeholder: reg.ID, Running: running}, &hb)
		if len(hb.Kill) != 0 {
			t.Fatalf("kill list %+v", hb.Kill)
		}
		var reports []protocol.Report
		for _, a := range next.Jobs {
			reports = append(reports, protocol.Report{ID: a.ID, Attempt: a.Attempt})
		}
		p.do(protocol.OpReport.Name, protocol.ReportBatch{Placeholder: reg.ID, Reports: reports}, nil)
	}
	var w protocol.WaitReply
	user.do(protocol.OpWait.Name, protocol.Wait{IDs: sub.IDs, TimeoutMS: 5000}, &w)
	if len(w.Jobs) != 1 || w.Jobs[0].State != "D" {
		t.Fatalf("job run through the placeholder connection: %+v", w)
	}
}

// Site administration makes the CLS start processes or log in elsewhere
// with its owner's keys: only an admin peer (the owner's socket, or a key
// given the admin role) may do it. Anyone else is refused, and the
// refusal is logged with who asked.
func TestAdminOps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maxRole, hello string
		allowed        bool
	}{
		{protocol.RoleAdmin, "", true},
		{protocol.RoleAdmin, protocol.RoleUser, false}, // narrowed
		{protocol.RoleUser, "", false},
		{protocol.RolePlaceholder, "", false},
	} {
		var logBuf syncBuf
		var calls []string
		var mu sync.Mutex
		srv := &Server{Store: newStore(t), Log: slog.New(slog.NewTextHandler(&logBuf, nil))}
		called := func(op string) {
			mu.Lock()
			calls = append(calls, op)
			mu.Unlock()
		}
		Route(srv, protocol.OpSiteAdd, func(context.Context, protocol.SiteSpec) (protocol.SiteInfo, error) {
			called(protocol.OpSiteAdd.Name)
			return protocol.SiteInfo{}, nil
		})
		Route(srv, protocol.OpSiteRemove, func(context.Context, protocol.SiteRemove) (protocol.SiteInfo, error) {
			called(protocol.OpSiteRemove.Name)
			return protocol.SiteInfo{}, nil
		})
		Route(srv, protocol.OpSiteList, func(context.Context, protocol.Empty) (protocol.SiteList, error) {
			called(protocol.OpSiteList.Name)
			return protocol.SiteList{}, nil
		})
		const key = "ssh-key:SHA256:test-key"
		p := connectAs(t, srv, Peer{MaxRole: tc.maxRole, Identity: key})
		p.hello(tc.hello)
		name := tc.maxRole + "/" + tc.hello
		for _, op := range []string{protocol.OpSiteAdd.Name, protocol.OpSiteRemove.Name} {
			body := protocol.SiteSpec{Name: "x", Type: "local"}
			if tc.allowed {
				p.do(op, body, nil)
				continue
			}
			e := p.fails(op, body, protocol.CodeForbidden)
			if !strings.Contains(e.Msg, "needs the admin role") && !strings.Contains(e.Msg, "a placeholder may not") {
				t.Errorf("%s %s: refusal %q", name, op, e.Msg)
			}
			if !strings.Contains(logBuf.String(), "level=WARN msg=\"refused") || !strings.Contains(logBuf.String(), key) ||
				!strings.Contains(logBuf.String(), "op="+op) {
				t.Errorf("%s %s: the refusal is not logged with the key:\n%s", name, op, logBuf.String())
			}
		}
		if tc.maxRole != protocol.RolePlaceholder {
			p.do(protocol.OpSiteList.Name, struct{}{}, nil) // looking is not administering
		}
		mu.Lock()
		want := 1
		if tc.allowed {
			want = 3
		}
		if tc.maxRole == protocol.RolePlaceholder {
			want = 0
		}
		if len(calls) != want {
			t.Errorf("%s: handlers ran for %v; want %d calls", name, calls, want)
		}
		mu.Unlock()
	}
}

// syncBuf is a log sink safe for the server's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPlaceholderSpeaksOnlyForItself(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	var mu sync.Mutex
	events := map[int64][]bool{}
	srv := &Server{Store: st, OnPlaceholder: func(id int64, reg protocol.Register, connected bool) {
		mu.Lock()
		events[id] = append(events[id], connected)
		mu.Unlock()
	}}
	user := connect(t, srv, protocol.RoleUser)
	user.hello("")
	var sub protocol.SubmitReply
	user.do(protocol.OpSubmit.Name, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "t", Command: "true"}}}, &sub)

	a := connect(t, srv, protocol.RolePlaceholder)
	a.hello("")
	var ra protocol.RegisterReply
	a.do(protocol.OpRegister.Name, protocol.Register{Site: "a", Host: "ha", Slots: 1}, &ra)
	var next protocol.NextReply
	a.do(protocol.OpNext.Name, protocol.Next{Placeholder: ra.ID, Free: 1}, &next)
	if len(next.Jobs) != 1 {
		t.Fatalf("next %+v", next)
	}
	job := next.Jobs[0]

	b := connect(t, srv, protocol.RolePlaceholder)
	b.hello("")
	var rb protocol.RegisterReply
	b.do(protocol.OpRegister.Name, protocol.Register{Site: "b", Host: "hb", Slots: 1}, &rb)
	for _, tc := range []struct {
		op   string
		body any
	}{
		{protocol.OpReport.Name, protocol.ReportBatch{Placeholder: ra.ID, Reports: []protocol.Report{{ID: job.ID, Attempt: job.Attempt, Exit: 1}}}},
		{protocol.OpNext.Name, protocol.Next{Placeholder: ra.ID, Free: 1, Reports: []protocol.Report{{ID: job.ID, Attempt: job.Attempt, Exit: 1}}}},
		{protocol.OpHeartbeat.Name, protocol.Heartbeat{Placeholder: ra.ID, Running: []protocol.JobRef{{ID: job.ID, Attempt: job.Attempt}}}},
		{protocol.OpNext.Name, protocol.Next{Placeholder: 0, Free: 1}},
		{protocol.OpReport.Name, protocol.ReportBatch{Placeholder: 12345}},
	} {
		e := b.fails(tc.op, tc.body, protocol.CodeForbidden)
		if !strings.Contains(e.Msg, "did not register on this connection") {
			t.Fatalf("%s: %q", tc.op, e.Msg)
		}
	}
	var d protocol.JobDetail
	user.do(protocol.OpJob.Name, protocol.JobQuery{ID: job.ID}, &d)
	if d.State != "E" {
		t.Fatalf("another placeholder's report changed the job: %s", d.State)
	}
	// The owner may report.
	a.do(protocol.OpReport.Name, protocol.ReportBatch{Placeholder: ra.ID, Reports: []protocol.Report{{ID: job.ID, Attempt: job.Attempt}}}, nil)
	user.do(protocol.OpJob.Name, protocol.JobQuery{ID: job.ID}, &d)
	if d.State != "D" {
		t.Fatalf("owner's report: %s", d.State)
	}
	// Closing a's connection tells OnPlaceholder.
	a.c.Close()
	deadline := time.Now().Add(patience)
	for {
		mu.Lock()
		ev := append([]bool(nil), events[ra.ID]...)
		mu.Unlock()
		if len(ev) == 2 && ev[0] && !ev[1] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("OnPlaceholder events for %d: %v", ra.ID, ev)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestUserOps(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	p := connect(t, srv, protocol.RoleUser)
	p.hello("")
	var sub protocol.SubmitReply
	p.do(protocol.OpSubmit.Name, protocol.Submit{Jobs: []protocol.JobSpec{
		{Target: "a", Command: "echo a"}, {Target: "b", Command: "echo b", Prereqs: []string{"a"}},
	}}, &sub)
	if len(sub.IDs) != 2 {
		t.Fatalf("submit %+v", sub)
	}
	p.fails(protocol.OpSubmit.Name, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "a"}}}, protocol.CodeBadRequest)
	p.fails(protocol.OpSubmit.Name, json.RawMessage(`{"jobs":"many"}`), protocol.CodeBadRequest)

	r, stream := p.call(protocol.OpStat.Name, protocol.Stat{})
	if r.Err != nil || len(stream) != 1 {
		t.Fatalf("stat: %+v, %d frames", r.Err, len(stream))
	}
	var sr protocol.StatReply
	if err := json.Unmarshal(stream[0], &sr); err != nil || len(sr.Jobs) != 2 || sr.Jobs[1].State != "W" {
		t.Fatalf("stat frame %s", stream[0])
	}
	p.fails(protocol.OpStat.Name, protocol.Stat{States: "?"}, protocol.CodeBadRequest)

	var d protocol.JobDetail
	p.do(protocol.OpJob.Name, protocol.JobQuery{ID: sub.IDs[1]}, &d)
	if d.Target != "b" || len(d.WaitingOn) != 1 {
		t.Fatalf("job %+v", d)
	}
	p.fails(protocol.OpJob.Name, protocol.JobQuery{ID: 99}, protocol.CodeNotFound)

	var ql protocol.QueueList
	p.do(protocol.OpQueueList.Name, nil, &ql)
	if len(ql.Queues) != 1 || ql.Queues[0].Name != protocol.DefaultQueue {
		t.Fatalf("queues %+v", ql)
	}
	sjf := "sjf"
	var qi protocol.QueueInfo
	p.do(protocol.OpQueueSet.Name, protocol.QueueSet{Name: "fast", Policy: &sjf}, &qi)
	if qi.Policy != "sjf" {
		t.Fatalf("queue.set %+v", qi)
	}
	bad := "x"
	p.fails(protocol.OpQueueSet.Name, protocol.QueueSet{Name: "fast", Policy: &bad}, protocol.CodeBadRequest)

	var ar protocol.ActionReply
	p.do(protocol.OpDelete.Name, protocol.Select{IDs: []int64{sub.IDs[0]}}, &ar)
	if len(ar.IDs) != 1 {
		t.Fatalf("delete %+v", ar)
	}
	var w protocol.WaitReply
	p.do(protocol.OpWait.Name, protocol.Wait{IDs: sub.IDs}, &w)
	if len(w.Jobs) != 2 {
		t.Fatalf("wait %+v", w)
	}
	p.do(protocol.OpRerun.Name, protocol.Select{Target: "a"}, &ar)
	if len(ar.IDs) != 1 {
		t.Fatalf("rerun %+v", ar)
	}
	p.fails(protocol.OpDelete.Name, protocol.Select{}, protocol.CodeBadRequest)
	p.fails(protocol.OpWait.Name, protocol.Wait{}, protocol.CodeBadRequest)

	var sum protocol.SummaryReply
	p.do(protocol.OpSummary.Name, nil, &sum)
	if len(sum.Queues) != 2 {
		t.Fatalf("summary %+v", sum)
	}

	// Bulk: chunks, commit; an abort discards; commit with nothing fails.
	p.do(protocol.OpBulkAdd.Name, protocol.BulkAdd{Line: 1, Jobs: []protocol.JobSpec{{Target: "c", Command: "1"}}}, nil)
	p.do(protocol.OpBulkAdd.Name, protocol.BulkAdd{Line: 2, Jobs: []protocol.JobSpec{{Target: "c", Command: "2"}}}, nil)
	var bc protocol.SubmitReply
	p.do(protocol.OpBulkCommit.Name, nil, &bc)
	if bc.First != 3 || bc.Count != 2 {
		t.Fatalf("bulk commit %+v", bc)
	}
	p.fails(protocol.OpBulkCommit.Name, nil, protocol.CodeBadRequest)
	p.do(protocol.OpBulkAdd.Name, protocol.BulkAdd{Line: 1, Jobs: []protocol.JobSpec{{Target: "d", Command: "1"}}}, nil)
	p.do(protocol.OpBulkAbort.Name, nil, nil)
	p.fails(protocol.OpBulkCommit.Name, nil, protocol.CodeBadRequest)
	e := p.fails(protocol.OpBulkAdd.Name, protocol.BulkAdd{Line: 7, Jobs: []protocol.JobSpec{{Target: "d", Command: "1"}, {Target: "d"}}}, protocol.CodeBadRequest)
	if !strings.HasPrefix(e.Msg, "line 8: ") {
		t.Fatalf("bulk add error %q", e.Msg)
	}
	// A bad chunk drops the whole bulk.
	p.fails(protocol.OpBulkCommit.Name, nil, protocol.CodeBadRequest)
	// A cycle refuses the whole bulk.
	p.do(protocol.OpBulkAdd.Name, protocol.BulkAdd{Line: 1, Jobs: []protocol.JobSpec{{Target: "e", Command: "1"}, {Target: "a", Command: "1", Prereqs: []string{"b"}}}}, nil)
	e = p.fails(protocol.OpBulkCommit.Name, nil, protocol.CodeBadRequest)
	if !strings.Contains(e.Msg, "cycle") {
		t.Fatalf("bulk cycle error %q", e.Msg)
	}
	r, stream = p.call(protocol.OpStat.Name, protocol.Stat{Target: "e"})
	if r.Err != nil || len(stream) != 1 || string(stream[0]) != `{"jobs":[]}` {
		t.Fatalf("refused bulk added jobs: %s", stream)
	}

	e = p.fails("frobnicate", nil, protocol.CodeUnsupported)
	if !strings.Contains(e.Msg, `"frobnicate"`) {
		t.Fatalf("unknown op message %q", e.Msg)
	}
}

func TestPipelinedRequests(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	p := connect(t, srv, protocol.RoleUser)
	p.hello("")
	// A long wait must not hold up later requests on the same connection.
	var sub protocol.SubmitReply
	p.do(protocol.OpSubmit.Name, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "t", Command: "x"}}}, &sub)
	waitID := p.send(protocol.OpWait.Name, protocol.Wait{IDs: sub.IDs})
	var ids []uint64
	for i := 0; i < 50; i++ {
		ids = append(ids, p.send(protocol.OpSummary.Name, nil))
	}
	for _, id := range ids {
		if r := p.recv(id); r.Err != nil {
			t.Fatalf("summary %d: %+v", id, r.Err)
		}
	}
	var ar protocol.ActionReply
	p.do(protocol.OpDelete.Name, protocol.Select{IDs: sub.IDs}, &ar)
	if r := p.recv(waitID); r.Err != nil || !bytes.Contains(r.Body, []byte(`"state":"X"`)) {
		t.Fatalf("wait reply %s %+v", r.Body, r.Err)
	}
}

func TestGarbageInput(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	p := connect(t, srv, protocol.RoleUser)
	p.hello("")
	for _, line := range []string{
		"garbage", "{", `{"id":5}`, `{"id":"x","op":"stat"}`, "\x00\x01\x02\xff\xfe", `[]`, `null`, `{"id":6,"op":"submit","body":[1,2]}`,
		`{"id":7,"op":"next","body":{"placeholder":"me"}}`, `{"id":8,"op":"stat","body":{"states":5}}`,
	} {
		p.sendLine(line)
	}
	// Every bad line gets exactly one error reply and the connection lives.
	var got []*protocol.Response
	timeout := time.After(patience)
	for len(got) < 10 {
		select {
		case r := <-p.resps:
			got = append(got, r)
		case <-timeout:
			t.Fatalf("got %d error replies, want 10", len(got))
		}
	}
	for _, r := range got {
		if r.Err == nil || r.Err.Code != protocol.CodeBadRequest && r.Err.Code != protocol.CodeForbidden {
			t.Fatalf("garbage reply %+v", r)
		}
	}
	var sum protocol.SummaryReply
	p.do(protocol.OpSummary.Name, nil, &sum)
}

func TestBinaryJunkThenEOF(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	for _, junk := range [][]byte{
		bytes.Repeat([]byte{0xff, 0x00, 0x7f}, 100000), // long line, no newline
		[]byte("\x00\n\x00\n\r\n"),
		bytes.Repeat([]byte("{"), 70000),
	} {
		p := connect(t, srv, protocol.RoleUser)
		p.hello("")
		p.c.SetWriteDeadline(time.Now().Add(patience))
		if _, err := p.c.Write(junk); err != nil {
			t.Fatal(err)
		}
		p.c.Close()
		select {
		case <-p.served:
		case <-time.After(patience):
			t.Fatal("ServeConn did not return")
		}
	}
}

func TestOversizedFrame(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	p := connect(t, srv, protocol.RoleUser)
	p.hello("")
	go func() {
		big := bytes.Repeat([]byte("a"), protocol.MaxFrame+10)
		p.c.SetWriteDeadline(time.Now().Add(patience))
		p.c.Write(append(big, '\n'))
	}()
	select {
	case r := <-p.resps:
		if r == nil || r.Err == nil || r.Err.Code != protocol.CodeBadRequest || !strings.Contains(r.Err.Msg, "exceeds") {
			t.Fatalf("oversized frame reply %+v", r)
		}
	case <-time.After(patience):
		t.Fatal("no reply to an oversized frame")
	}
	p.closed()
}

func TestServeAndShutdown(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix sockets: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, protocol.RoleUser) }()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, `{"id":1,"op":"hello","body":{"proto":1}}`+"\n")
	r := protocol.NewReader(c)
	resp, err := r.ReadResponse()
	if err != nil || resp.Err != nil || resp.ID != 1 {
		t.Fatalf("hello over a socket: %+v, %v", resp, err)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("Serve did not return after cancel")
	}
	// The open connection is closed too.
	c.SetReadDeadline(time.Now().Add(patience))
	if _, err := r.ReadLine(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after shutdown: %v", err)
	}
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatal("Wait did not return")
	}
}

// Strings a placeholder supplies are refused at the door when too long or
// holding control characters: a host name of megabytes would fill the
// CLS's disk, one with escape sequences would reach mqstat's terminal.
func TestPeerTextIsChecked(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	p := connect(t, srv, protocol.RolePlaceholder)
	p.hello(protocol.RolePlaceholder)
	good := protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 1, OutDir: "/o"}
	for _, tt := range []struct {
		name string
		edit func(r *protocol.Register)
		want string
	}{
		{"huge host", func(r *protocol.Register) { r.Host = strings.Repeat("h", 3<<20) }, "host is 3145728 bytes"},
		{"host with a newline", func(r *protocol.Register) { r.Host = "h\n42 default fake" }, "control character"},
		{"site with ESC", func(r *protocol.Register) { r.Site = "s\x1b]0;title\x07" }, "control character"},
		{"C1 in out_dir", func(r *protocol.Register) { r.OutDir = "/o\u009b" }, "control character"},
		{"huge out_dir", func(r *protocol.Register) { r.OutDir = "/" + strings.Repeat("d", 5000) }, "out_dir is 5001 bytes"},
		{"huge batch id", func(r *protocol.Register) { r.Batch = strings.Repeat("7", 3<<20) }, "batch is 3145728 bytes"},
		{"batch id with ESC", func(r *protocol.Register) { r.Batch = "42\x1b[2J" }, "control character"},
		// A capacity the CLS cannot take is the peer's mistake, not the
		// CLS's: as an internal error, the agent retried it for ever.
		{"GPU id with a blank", func(r *protocol.Register) {
			r.Capacity = &protocol.Capacity{CPUs: 1, GPUs: 1, GPUIDs: []string{"GPU 0"}}
		}, `capacity: GPU id "GPU 0"`},
		{"negative cpus asked", func(r *protocol.Register) { r.Asked = &protocol.Capacity{CPUs: -1} }, "asked: cpus must be"},
	} {
		r := good
		tt.edit(&r)
		e := p.fails(protocol.OpRegister.Name, r, protocol.CodeBadRequest)
		if !strings.Contains(e.Msg, tt.want) || strings.ContainsAny(e.Msg, "\x1b\x07") {
			t.Errorf("%s: error %q, want one saying %q without control characters", tt.name, e.Msg, tt.want)
		}
	}
	var reg protocol.RegisterReply
	p.do(protocol.OpRegister.Name, good, &reg)
}

// TestBadReportItemKeepsBatch: a report with a reason holding an escape
// sequence, a reason too long, and a missing input with control
// characters comes in one batch with good ones: the batch is taken, every
// job ends, the bad texts stored escaped and clipped.
func TestBadReportItemKeepsBatch(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	user := connect(t, srv, protocol.RoleUser)
	user.hello("")
	var sub protocol.SubmitReply
	var jobs []protocol.JobSpec
	for _, tg := range []string{"a", "b", "c", "d", "e", "f"} {
		jobs = append(jobs, protocol.JobSpec{Target: tg, Command: "true"})
	}
	user.do(protocol.OpSubmit.Name, protocol.Submit{Jobs: jobs}, &sub)
	p := connect(t, srv, protocol.RolePlaceholder)
	p.hello(protocol.RolePlaceholder)
	var reg protocol.RegisterReply
	p.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 6, OutDir: "/o"}, &reg)
	var next protocol.NextReply
	p.do(protocol.OpNext.Name, protocol.Next{Placeholder: reg.ID, Free: 6}, &next)
	if len(next.Jobs) != 6 {
		t.Fatalf("got %d jobs, want 6", len(next.Jobs))
	}
	rep := func(i int) protocol.Report {
		return protocol.Report{ID: next.Jobs[i].ID, Attempt: next.Jobs[i].Attempt}
	}
	r0, r1, r2, r3, r4, r5 := rep(0), rep(1), rep(2), rep(3), rep(4), rep(5)
	r1.Exit, r1.Reason, r1.Missing = 127, "input: a\nb\x1b[31m missing", []string{"a\nb\u001b[31m", "/fine"}
	r2.Exit, r2.Reason = 1, strings.Repeat("r", protocol.MaxReasonBytes+1)
	r4.Exit, r4.Reason = 1, "oops\x1b[2J"
	r4.OutputLost = "lost\u009b"
	p.do(protocol.OpReport.Name, protocol.ReportBatch{Placeholder: reg.ID, Reports: []protocol.Report{r0, r1, r2}}, nil)
	p.do(protocol.OpNext.Name, protocol.Next{Placeholder: reg.ID, Reports: []protocol.Report{r3, r4, r5}}, &protocol.NextReply{})
	var w protocol.WaitReply
	user.do(protocol.OpWait.Name, protocol.Wait{IDs: sub.IDs, TimeoutMS: int(patience / time.Millisecond)}, &w)
	if len(w.Jobs) != 6 {
		t.Fatalf("wait: %+v", w)
	}
	for i, j := range w.Jobs {
		want := "D"
		if i == 1 || i == 2 || i == 4 {
			want = "F"
		}
		if j.State != want {
			t.Errorf("job %d (%s): state %s, want %s", j.ID, jobs[i].Target, j.State, want)
		}
	}
	var info protocol.JobDetail
	user.do(protocol.OpJob.Name, protocol.JobQuery{ID: next.Jobs[4].ID}, &info)
	raw, _ := json.Marshal(info)
	if strings.Contains(string(raw), `\u001b`) || !strings.Contains(string(raw), `oops\\x1b[2J`) {
		t.Errorf("job 5's record: %s, want its reason escaped", raw)
	}
}
