package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
)

// TestCutShort: an action on many jobs whose connection closed before the
// CLS answered says that the batches committed stay so and how to do the
// rest; any other error is left as it is.
func TestCutShort(t *testing.T) {
	err := cutShort(fmt.Errorf("delete: %w", client.ErrClosed), batchesDone("mqdel"))
	if !errors.Is(err, client.ErrClosed) || !strings.Contains(err.Error(), "the batches it committed stay so") || !strings.Contains(err.Error(), "mqdel again for the rest") {
		t.Errorf("cut short: %v", err)
	}
	other := errors.New("no such job")
	if got := cutShort(other, batchesDone("mqdel")); got != other {
		t.Errorf("another error became %v", got)
	}
	if cutShort(nil, "x") != nil {
		t.Error("nil became an error")
	}
}

// TestBulkActionCutShort: every command that acts on selected jobs in
// committed batches says, when its connection closes before the CLS
// answered, that the batches committed stay so and what to run again;
// "connection closed" alone reads as nothing done.
func TestBulkActionCutShort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		app  func(Env) *cli.App
		args []string
		held bool // the jobs are submitted held
	}{
		{Mqdel, []string{"mqdel", "-t", "t"}, false},
		{Mqhold, []string{"mqhold", "-t", "t"}, false},
		{Mqrls, []string{"mqrls", "-t", "t"}, true},
		{Mqalter, []string{"mqalter", "--mem", "2G", "-t", "t"}, true},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			args := []string{"--array", "1-3", "t", "true"}
			if tc.held {
				args = append([]string{"-H"}, args...)
			}
			if _, e, code := tb.mqsub("", args...); code != 0 {
				t.Fatalf("mqsub: exit %d: %s", code, e)
			}
			tb.cut = func(dial int, c net.Conn) net.Conn {
				// The reply naming the jobs acted on is lost.
				return &cutConn{Conn: c, match: []byte(`"ids":`), received: make(chan struct{})}
			}
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), tc.app(tb.env(&stdout, &stderr)), tc.args)
			if code == 0 || !strings.Contains(stderr.String(), "the batches it committed stay so") || !strings.Contains(stderr.String(), tc.args[0]+" again for the rest") {
				t.Errorf("exit %d, stderr %q: want it to say the committed batches stay so", code, stderr.String())
			}
		})
	}
}
