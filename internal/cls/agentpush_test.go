package cls

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestAgentPushRefusesBadChunks: a placeholder answering a put order
// cannot announce a negative size, change it, or send past it; the bytes
// that fit go through.
func TestAgentPushRefusesBadChunks(t *testing.T) {
	data := make([]byte, 1<<20)
	cases := []struct {
		name   string
		chunks []protocol.FileChunk // the last one is the one refused
	}{
		{"size -1", []protocol.FileChunk{{Size: -1, Data: data}}},
		{"past the size", []protocol.FileChunk{{Size: 10, Data: data}}},
		{"size changed", []protocol.FileChunk{{Size: 2 << 20, Data: data}, {Offset: 1 << 20, Size: 300 << 20, Data: data}}},
		{"end short of the size", []protocol.FileChunk{{Size: 10, Data: data[:5], EOF: true}}},
		{"negative size, empty", []protocol.FileChunk{{Size: -5, EOF: true}}},
		{"absurd size", []protocol.FileChunk{{Size: 1 << 62, Data: data}}},
		{"chunk too big", []protocol.FileChunk{{Size: 4 << 20, Data: make([]byte, protocol.MaxFileChunk+1)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			hub := newAgentHub()
			hub.placeholder(1, "s", "h", true)
			opened := make(chan error, 1)
			go func() {
				r, _, err := agentPlace{hub: hub, site: "s", host: "h"}.Open(ctx, "/in")
				if err == nil {
					buf := make([]byte, 4<<20)
					for err == nil {
						_, err = r.Read(buf)
					}
					r.Close()
				}
				opened <- err
			}()
			o, err := hub.Poll(ctx, 1, time.Minute)
			if err != nil || o.Kind != protocol.FilePut {
				t.Fatalf("poll: %+v, %v", o, err)
			}
			for i, ch := range c.chunks {
				ch.Placeholder, ch.Xfer = 1, o.Xfer
				err := hub.Push(ctx, ch)
				last := i == len(c.chunks)-1
				var pe *protocol.Error
				if last && !(errors.As(err, &pe) && pe.Code == protocol.CodeBadRequest) {
					t.Fatalf("chunk %d: err = %v, want it refused", i+1, err)
				}
				if !last && err != nil {
					t.Fatalf("chunk %d: %v", i+1, err)
				}
			}
			hub.Done(ctx, protocol.FileDone{Placeholder: 1, Xfer: o.Xfer, Error: "refused"})
			if err := <-opened; err == nil {
				t.Fatal("the reader ended without an error")
			}
		})
	}
}
