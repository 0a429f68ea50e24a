package rewait

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

func TestGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		gone bool
	}{
		{client.ErrClosed, true},
		{fmt.Errorf("reading: %w", io.EOF), true},
		{&protocol.Error{Code: protocol.CodeShutdown, Msg: "stopping"}, true},
		{errors.New("no such job"), false},
		{context.Canceled, false},
	} {
		if got := Gone(tc.err); got != tc.gone {
			t.Errorf("Gone(%v) = %v, want %v", tc.err, got, tc.gone)
		}
	}
}

// TestWaitGivesUp: a wait whose CLS went away is asked again once one
// answers; one that stays away ends the wait with the reason after the
// patience; an error that is not the CLS going away ends it at once.
func TestWaitGivesUp(t *testing.T) {
	t.Parallel()
	dials := 0
	w := Waiter{Name: "mqwait", Note: io.Discard, Patience: 300 * time.Millisecond,
		Dial: func(context.Context) (*client.Client, error) { dials++; return nil, errors.New("connection refused") }}
	calls := 0
	err := w.Wait(context.Background(), nil, func(*client.Client) error { calls++; return client.ErrClosed })
	if err == nil || !strings.Contains(err.Error(), "not back within 300ms") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Wait = %v, want it to give up with the dial's error", err)
	}
	if calls != 1 || dials < 2 {
		t.Errorf("wait ran %d times, dialled %d; want 1 and retries", calls, dials)
	}
	other := errors.New("no such job")
	if err := w.Wait(context.Background(), nil, func(*client.Client) error { return other }); err != other {
		t.Errorf("Wait = %v, want %v at once", err, other)
	}
	// MQ_RECONNECT=0 (no Dial): the wait ends at once, saying the CLS
	// went away and the jobs are kept, as a wait given up says (it said
	// only "connection to the CLS closed").
	now := Waiter{Name: "mqwait", Note: io.Discard}
	err = now.Wait(context.Background(), nil, func(*client.Client) error { return client.ErrClosed })
	if !errors.Is(err, client.ErrClosed) || !strings.Contains(err.Error(), "the CLS went away") || !strings.Contains(err.Error(), "the jobs are kept") {
		t.Errorf("Wait without Dial = %v, want the CLS gone and the jobs kept", err)
	}
}
