// Package rewait keeps a command that waits for jobs (mqwait, mqsub -b)
// waiting across a restart of the CLS. What it waits for is kept in the
// metaqueue, not in the connection: when the CLS goes away meanwhile
// (cls serve restarted, a crash, an upgrade), the wait is asked again of
// the CLS that comes back, instead of failing a script whose jobs go on.
package rewait

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/backoff"
	"github.com/mq-hpc/mq/protocol"
)

// Patience is how long a wait goes on while no CLS can be reached: long
// enough for a restart, not forever for a CLS that was stopped for good.
const Patience = 2 * time.Minute

// Gone says whether err is the CLS going away: its connection closed,
// or the CLS shutting down.
func Gone(err error) bool {
	return errors.Is(err, client.ErrClosed) || errors.Is(err, io.EOF) || protocol.IsCode(err, protocol.CodeShutdown)
}

// Waiter waits for jobs on a connection to the CLS, dialling a new one
// when the CLS has gone away.
type Waiter struct {
	Dial     func(context.Context) (*client.Client, error)
	Name     string    // the command, for the note
	Note     io.Writer // told once per time the CLS goes away
	Patience time.Duration
	// Kept is what the error of a wait given up says is kept ("the jobs
	// are kept (wait again once cls serve runs)" if "").
	Kept string
}

// Wait runs wait on cl and, each time it ends because the CLS went away,
// says so on w.Note and runs it again on a connection to the CLS once it
// is back. It gives up, with the reason, when no CLS answers for
// w.Patience (Patience if 0). The connections it dials it closes; cl is
// the caller's.
func (w Waiter) Wait(ctx context.Context, cl *client.Client, wait func(*client.Client) error) error {
	patience := cmp.Or(w.Patience, Patience)
	for {
		err := wait(cl)
		if err == nil || ctx.Err() != nil || !Gone(err) {
			return err
		}
		if w.Dial == nil { // MQ_RECONNECT=0: not waited for, but said so
			return fmt.Errorf("the CLS went away (%w); %s", err, w.kept())
		}
		if w.Note != nil {
			fmt.Fprintf(w.Note, "%s: the CLS went away (%v); waiting up to %s for it to come back (the jobs go on)\n", w.Name, err, patience)
		}
		next, err := w.redial(ctx, patience)
		if err != nil {
			return err
		}
		defer next.Close()
		cl = next
	}
}

// kept is what a wait given up says is kept.
func (w Waiter) kept() string {
	return cmp.Or(w.Kept, "the jobs are kept (wait again once cls serve runs)")
}

// redial dials until a CLS answers, for up to patience.
func (w Waiter) redial(ctx context.Context, patience time.Duration) (*client.Client, error) {
	give := time.Now().Add(patience)
	again := backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.2}
	for {
		cl, err := w.Dial(ctx)
		if err == nil {
			return cl, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if time.Now().After(give) {
			return nil, fmt.Errorf("the CLS went away and was not back within %s: %w; %s", patience, err, w.kept())
		}
		if again.Wait(ctx) != nil {
			return nil, err
		}
	}
}
