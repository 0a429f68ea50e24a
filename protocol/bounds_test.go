package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestFrameWritersRefuseOversize: no writer produces a frame the reader
// would refuse.
func TestFrameWritersRefuseOversize(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", MaxFrame)
	if b, err := AppendFrame([]byte("keep"), Response{ID: 1, Body: json.RawMessage(`"` + big + `"`)}); !errors.Is(err, ErrFrameTooLarge) || string(b) != "keep" {
		t.Errorf("AppendFrame of %d bytes: %v, dst %d bytes", len(big), err, len(b))
	}
	if _, err := AppendRequest(nil, 1, "submit", []byte(`"`+big+`"`)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("AppendRequest of %d bytes: %v", len(big), err)
	}
	if _, err := AppendFrame(nil, Response{ID: 1, Body: json.RawMessage(`"` + big[:MaxFrame-100] + `"`)}); err != nil {
		t.Errorf("AppendFrame just under MaxFrame: %v", err)
	}
	if b, err := AppendResponse([]byte("keep"), &Response{ID: 1, More: true, Body: json.RawMessage(`"` + big + `"`)}); !errors.Is(err, ErrFrameTooLarge) || string(b) != "keep" {
		t.Errorf("AppendResponse of %d bytes: %v, dst %d bytes", len(big), err, len(b))
	}
	if _, err := AppendResponse(nil, &Response{ID: 1, Body: json.RawMessage(`"` + big[:MaxFrame-100] + `"`)}); err != nil {
		t.Errorf("AppendResponse just under MaxFrame: %v", err)
	}
}

// TestActionReplyBounded: an ActionReply keeps the first MaxActionIDs ids
// and MaxActionErrors errors and counts all, so it fits in a frame.
func TestActionReplyBounded(t *testing.T) {
	t.Parallel()
	var r ActionReply
	for id := int64(1); id <= 1_000_000; id++ {
		r.AddID(id + 1e12)
	}
	for i := 0; i < 50_000; i++ {
		r.AddError(strings.Repeat("e", 60))
	}
	if r.Acted() != 1_000_000 || len(r.IDs) != MaxActionIDs || r.Refused() != 50_000 || len(r.Errors) != MaxActionErrors {
		t.Fatalf("acted %d (%d listed), refused %d (%d listed)", r.Acted(), len(r.IDs), r.Refused(), len(r.Errors))
	}
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AppendFrame(nil, Response{ID: 1, Body: body}); err != nil {
		t.Fatalf("a full ActionReply does not fit in a frame: %v", err)
	}
	// An older server's reply (no counts) is taken as whole.
	old := ActionReply{IDs: []int64{1, 2}, Errors: []string{"x"}}
	if old.Acted() != 2 || old.Refused() != 1 {
		t.Errorf("old reply: acted %d, refused %d", old.Acted(), old.Refused())
	}
}
