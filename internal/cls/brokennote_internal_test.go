package cls

import (
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// The dashboard says how many placeholders of a site said their node
// cannot run jobs, and the latest's host and why; nothing when none did.
func TestBrokenNote(t *testing.T) {
	if got := brokenNote(nil); got != "" {
		t.Errorf("none broken: %q", got)
	}
	at := time.Unix(1000, 0)
	got := brokenNote([]protocol.BrokenPlaceholder{{ID: 8, Host: "n8", Why: "stuck", At: at}, {ID: 7, Why: "older", At: at.Add(-time.Hour)}})
	if want := "2 broken, their node cannot run jobs (latest: placeholder 8 on n8: stuck)"; got != want {
		t.Errorf("note %q, want %q", got, want)
	}
}
