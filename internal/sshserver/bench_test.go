package sshserver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// BenchmarkRoundTrip measures one request round trip on a persistent SSH
// session over loopback: a placeholder heartbeat (memory only, through the
// CLS's core), the request a running placeholder sends most. It reports the
// median besides the mean (target: median <= 0.5 ms).
//
//	go test -run - -bench RoundTrip ./sshserver
func BenchmarkRoundTrip(b *testing.B) {
	c := newCLS(b)
	signer, _ := c.key("placeholder")
	cl, err := c.connect(signer, "")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	reg, err := client.Do(ctx, cl, protocol.OpRegister, protocol.Register{Site: "s", Host: "h", Slots: 1, OutDir: "/x"})
	if err != nil {
		b.Fatal(err)
	}
	hb := protocol.Heartbeat{Placeholder: reg.ID}
	benchCalls(b, cl, protocol.OpHeartbeat, hb)
}

// BenchmarkRoundTripSocket is the same request over the Unix-socket-like
// in-process pipe, for the ratio.
func BenchmarkRoundTripSocket(b *testing.B) {
	c := newCLS(b)
	cl, err := client.New(context.Background(), c.pipe(), "", "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	reg, err := client.Do(context.Background(), cl, protocol.OpRegister, protocol.Register{Site: "s", Host: "h", Slots: 1, OutDir: "/x"})
	if err != nil {
		b.Fatal(err)
	}
	benchCalls(b, cl, protocol.OpHeartbeat, protocol.Heartbeat{Placeholder: reg.ID})
}

func benchCalls[Req, Resp any](b *testing.B, cl *client.Client, op protocol.Op[Req, Resp], body Req) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := client.Do(ctx, cl, op, body); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "median-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
