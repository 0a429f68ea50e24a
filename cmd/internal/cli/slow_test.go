package cli

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// lockedBuffer is a bytes.Buffer written and read from two goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSlowCLSSaid: a command whose request the CLS leaves unanswered (a
// CLS stopped or wedged after its hello), a call or a stream without its
// first frame, says so on stderr, naming the op, and goes on waiting
// until interrupted.
func TestSlowCLSSaid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		app     func(Env) *cli.App
		args    []string
		op      string // held
		answers map[string]clitest.Reply
	}{
		{Mqdel, []string{"mqdel", "5"}, protocol.OpDelete.Name, nil},
		{Mqstat, []string{"mqstat"}, protocol.OpStat.Name, map[string]clitest.Reply{protocol.OpArrays.Name: {Body: protocol.ArraysReply{}}}},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			t.Parallel()
			var stdout, stderr lockedBuffer
			replies := map[string]clitest.Reply{tc.op: {Hold: true}}
			maps.Copy(replies, tc.answers)
			env := Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getwd: func() (string, error) { return t.TempDir(), nil },
				Dial: clitest.Dial(replies), SlowAfter: 20 * time.Millisecond}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			code := make(chan int, 1)
			go func() { code <- Run(ctx, tc.app(env), tc.args) }()
			want := tc.args[0] + ": the CLS has not answered " + tc.op + " for 20ms (stopped, wedged or very busy?); still waiting, Ctrl-C to stop\n"
			for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), want); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("stderr %q, want %q", stderr.String(), want)
				}
			}
			select {
			case c := <-code:
				t.Fatalf("%s ended (%d) with its request unanswered", tc.args[0], c)
			default:
			}
			cancel()
			if c := <-code; c != ExitInterrupted {
				t.Errorf("exit %d after the interrupt, want %d", c, ExitInterrupted)
			}
		})
	}
}

// TestWaiterReconnect: MQ_RECONNECT sets how long mqwait and mqsub -b
// wait for a CLS that went away; 0 not at all; a value that is no
// duration is said and the default kept.
func TestWaiterReconnect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		environ  []string
		patience time.Duration
		redials  bool
		warning  string
	}{
		{nil, 0, true, ""},
		{[]string{"MQ_RECONNECT=10m"}, 10 * time.Minute, true, ""},
		{[]string{"MQ_RECONNECT=0"}, 0, false, ""},
		{[]string{"MQ_RECONNECT=soon"}, 0, true, `mqwait: warning: MQ_RECONNECT="soon" is not a duration such as 10m (2m0s used)` + "\n"},
	} {
		var note bytes.Buffer
		env := Env{Environ: func() []string { return tc.environ }}
		w := waiter(env, "mqwait", &note)
		if w.Patience != tc.patience || (w.Dial != nil) != tc.redials || note.String() != tc.warning {
			t.Errorf("%q: patience %v, redials %v, said %q; want %v, %v, %q", tc.environ, w.Patience, w.Dial != nil, note.String(), tc.patience, tc.redials, tc.warning)
		}
	}
}
