package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

type nopCloser struct{ io.ReadWriter }

func (nopCloser) Close() error { return nil }

// TestReplyNeverExceedsFrame: a reply too large for a frame is answered
// with a too_large error (the client is not left waiting, nor sent a line
// it would refuse); a reply that fits goes as it is.
func TestReplyNeverExceedsFrame(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := &conn{rwc: nopCloser{&out}, log: slog.New(slog.DiscardHandler)}
	c.reply(7, struct{ S string }{strings.Repeat("x", protocol.MaxFrame)}, nil)
	c.reply(8, struct{ S string }{"small"}, nil)
	r := protocol.NewReader(&out)
	resp, err := r.ReadResponse()
	if err != nil {
		t.Fatalf("reading the oversized reply: %v", err)
	}
	if resp.ID != 7 || resp.Err == nil || resp.Err.Code != protocol.CodeTooLarge {
		t.Fatalf("oversized reply: %+v %+v", resp, resp.Err)
	}
	if resp, err = r.ReadResponse(); err != nil || resp.ID != 8 || resp.Err != nil {
		t.Fatalf("next reply: %+v, %v", resp, err)
	}
}

// TestStageRefusalTexts: each refused output chunk names what is wrong.
func TestStageRefusalTexts(t *testing.T) {
	t.Parallel()
	c := &conn{s: &Server{OutputDir: t.TempDir()}, log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		chunk protocol.OutputChunk
		want  string
	}{
		{protocol.OutputChunk{Stream: "stdin"}, `stream must be stdout or stderr, not "stdin"`},
		{protocol.OutputChunk{Stream: "stdout", Offset: -1}, "output offset -1 is negative"},
		{protocol.OutputChunk{Stream: "stdout", Offset: -1 << 62, Data: []byte("x")}, "output offset -4611686018427387904 is negative"},
		{protocol.OutputChunk{Stream: "stderr", Offset: protocol.MaxStaged + 64<<10, Data: []byte("x")}, "output beyond 67108864 bytes is not staged"},
		{protocol.OutputChunk{Stream: "stderr", Offset: 1<<63 - 1, Data: []byte("x")}, "output beyond 67108864 bytes is not staged"},
	} {
		err := c.stage(context.Background(), tc.chunk)
		if err == nil || err.Error() != tc.want {
			t.Errorf("stage(%s at %d): %v, want %q", tc.chunk.Stream, tc.chunk.Offset, err, tc.want)
		}
	}
}
