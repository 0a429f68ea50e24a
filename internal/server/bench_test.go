package server

import (
	"context"
	"net"
	"testing"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// BenchmarkPipelined measures the read loop's cost per request with many
// in flight on one connection (a placeholder's heartbeats, 64 at a time):
// what the bounds on requests in progress add to the hot path.
//
//	go test -run - -bench Pipelined ./server
func BenchmarkPipelined(b *testing.B) {
	srv := &Server{Store: newStore(b)}
	a, sc := net.Pipe()
	go srv.ServeConn(context.Background(), sc, protocol.RoleUser)
	ctx := context.Background()
	cl, err := client.New(ctx, a, protocol.RolePlaceholder, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	reg, err := client.Do(ctx, cl, protocol.OpRegister, protocol.Register{Site: "s", Host: "h", Slots: 1, OutDir: "/x"})
	if err != nil {
		b.Fatal(err)
	}
	hb := protocol.Heartbeat{Placeholder: reg.ID}
	const window = 64
	calls := make(chan *client.Call[protocol.HeartbeatReply], window)
	done := make(chan error, 1)
	go func() {
		for k := range calls {
			if _, err := k.Wait(ctx); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	b.ResetTimer()
	for range b.N {
		k, err := client.Go(cl, protocol.OpHeartbeat, hb)
		if err != nil {
			b.Fatal(err)
		}
		calls <- k
	}
	close(calls)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSubmitPrereq measures one job submitted per request, naming a
// prerequisite target that has jobs: what a pipeline submitted job by
// job (mqsub -p, the driver) pays, the empty-prerequisite check
// (prereqWarnings) included.
//
//	go test -run - -bench SubmitPrereq ./internal/server
func BenchmarkSubmitPrereq(b *testing.B) {
	srv := &Server{Store: newStore(b)}
	a, sc := net.Pipe()
	go srv.ServeConn(context.Background(), sc, protocol.RoleUser)
	ctx := context.Background()
	cl, err := client.New(ctx, a, protocol.RoleUser, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if _, err := client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "a", Command: "true", Cwd: "/tmp"}}}); err != nil {
		b.Fatal(err)
	}
	job := protocol.Submit{Jobs: []protocol.JobSpec{{Target: "b", Prereqs: []string{"a"}, Command: "true", Cwd: "/tmp"}}}
	b.ResetTimer()
	for range b.N {
		r, err := client.Do(ctx, cl, protocol.OpSubmit, job)
		if err != nil || len(r.Warnings) > 0 {
			b.Fatal(r, err)
		}
	}
}
