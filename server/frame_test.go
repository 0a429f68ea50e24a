package server

import (
	"bytes"
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
