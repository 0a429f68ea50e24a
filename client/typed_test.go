package client

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// fakeCLS answers each request on c with answer's frames, and records the
// request lines.
func fakeCLS(t *testing.T, c net.Conn, answer func(req protocol.Request) []protocol.Response) <-chan string {
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			lines <- sc.Text()
			var req protocol.Request
			if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
				t.Error(err)
				return
			}
			for _, r := range answer(req) {
				b, _ := protocol.AppendFrame(nil, r)
				c.Write(b)
			}
		}
	}()
	return lines
}

// Typed calls send the same frames as the protocol always had and decode
// replies into the op's reply type.
func TestTypedCalls(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer b.Close()
	lines := fakeCLS(t, b, func(req protocol.Request) []protocol.Response {
		switch req.Op {
		case "hello":
			return []protocol.Response{{ID: req.ID, Body: json.RawMessage(`{"proto":1,"server":"x","role":"user"}`)}}
		case "submit":
			return []protocol.Response{{ID: req.ID, Body: json.RawMessage(`{"ids":[4,5]}`)}}
		case "stat":
			return []protocol.Response{
				{ID: req.ID, More: true, Body: json.RawMessage(`{"jobs":[{"id":4}]}`)},
				{ID: req.ID, More: true, Body: json.RawMessage(`{"jobs":[{"id":5}]}`)},
				{ID: req.ID, Body: json.RawMessage(`{}`)},
			}
		case "bulk.abort":
			return []protocol.Response{{ID: req.ID, Body: json.RawMessage(`{}`)}}
		}
		return []protocol.Response{{ID: req.ID, Err: protocol.Errorf(protocol.CodeUnsupported, "unknown op %q", req.Op)}}
	})
	ctx := context.Background()
	cl, err := New(ctx, a, protocol.RoleUser, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := <-lines; got != `{"id":1,"op":"hello","body":{"proto":1,"role":"user","client":"test"}}` {
		t.Errorf("hello frame %s", got)
	}

	sub, err := Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "t", Command: "c"}}})
	if err != nil || len(sub.IDs) != 2 || sub.IDs[1] != 5 {
		t.Fatalf("submit: %+v, %v", sub, err)
	}
	if got := <-lines; got != `{"id":2,"op":"submit","body":{"jobs":[{"target":"t","command":"c"}]}}` {
		t.Errorf("submit frame %s", got)
	}

	var ids []int64
	err = Stream(ctx, cl, protocol.OpStat, protocol.Stat{States: "Q"}, func(r protocol.StatReply) error {
		for _, j := range r.Jobs {
			ids = append(ids, j.ID)
		}
		return nil
	})
	if err != nil || len(ids) != 2 {
		t.Fatalf("stat: %v, %v", ids, err)
	}
	<-lines

	k, err := Go(cl, protocol.OpBulkAbort, protocol.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-lines; got != `{"id":4,"op":"bulk.abort","body":{}}` {
		t.Errorf("bulk.abort frame %s", got)
	}

	_, err = Do(ctx, cl, protocol.OpSiteList, protocol.Empty{})
	if !protocol.IsCode(err, protocol.CodeUnsupported) {
		t.Errorf("site.list on a CLS without it: %v", err)
	}
}

// TestSlowNotice: a request the CLS leaves unanswered past the notice's
// delay is noted once, by its op; a long poll (protocol.Spec.Waits) is
// not, however long its answer takes.
func TestSlowNotice(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer b.Close()
	// A CLS that reads every request and answers none but hello until
	// released (one stopped after its hello, say).
	release := make(chan struct{})
	go func() {
		var mu sync.Mutex
		sc := bufio.NewScanner(b)
		for sc.Scan() {
			var req protocol.Request
			if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
				t.Error(err)
				return
			}
			go func() {
				if req.Op != "hello" {
					<-release
				}
				fr, _ := protocol.AppendFrame(nil, protocol.Response{ID: req.ID, Body: json.RawMessage(`{}`)})
				mu.Lock()
				defer mu.Unlock()
				b.Write(fr)
			}()
		}
	}()
	notes := make(chan string, 8)
	ctx := context.Background()
	cl, err := New(ctx, a, protocol.RoleUser, "test", SlowNotice(20*time.Millisecond, func(op string, _ time.Duration) { notes <- op }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	wait, err := Go(cl, protocol.OpWait, protocol.Wait{IDs: []int64{1}})
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { _, err := wait.Wait(ctx); waited <- err }()
	done := make(chan error, 1)
	go func() { _, err := Do(ctx, cl, protocol.OpRelease, protocol.Select{IDs: []int64{1}}); done <- err }()
	// The hello is answered at once, but on a loaded machine perhaps
	// past the 20 ms too: a notice of it is right, and not this test's.
	for noted := false; !noted; {
		select {
		case op := <-notes:
			if op != "hello" && op != "release" {
				t.Errorf("noted %q first, want release", op)
			}
			noted = op == "release"
		case <-time.After(time.Minute):
			t.Fatal("no notice of an unanswered request")
		}
	}
	close(release) // the fake answers each request in turn
	for _, ch := range []chan error{waited, done} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	close(notes)
	for op := range notes {
		if op != "hello" {
			t.Errorf("noted %q as well (a long poll, or a second time)", op)
		}
	}
}
