package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// mqsub -b --timeout gives up at its timeout also while the CLS is away
// (killed, not back yet), as mqwait --timeout does, rather than waiting
// out the two minutes it waits for a CLS to come back.
func TestMqsubWaitTimeoutWhileCLSAway(t *testing.T) {
	t.Parallel()
	replies := map[string]clitest.Reply{
		protocol.OpSubmit.Name: {Body: protocol.SubmitReply{IDs: []int64{7}}},
		// The CLS stops while mqsub waits; no CLS answers after it.
		protocol.OpWait.Name: {Err: &protocol.Error{Code: protocol.CodeShutdown, Msg: "the CLS is stopping"}},
	}
	serve := clitest.Dial(replies)
	var dials atomic.Int32
	dial := func(ctx context.Context) (io.ReadWriteCloser, error) {
		if dials.Add(1) == 1 {
			return serve(ctx)
		}
		return nil, errors.New("connection refused")
	}
	var o, e bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: dial}
	start := time.Now()
	code := Run(context.Background(), Mqsub(env), []string{"mqsub", "-b", "--timeout", "1s", "t", "true"})
	took := time.Since(start)
	if code != ExitFailed || !strings.Contains(e.String(), "timed out after 1s") || strings.TrimSpace(o.String()) != "7" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, the id, and timed out after 1s", code, o.String(), e.String(), ExitFailed)
	}
	if took > 30*time.Second {
		t.Errorf("mqsub -b --timeout 1s gave up after %v", took.Round(time.Second))
	}
}
