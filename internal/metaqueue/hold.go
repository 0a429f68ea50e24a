package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/internal/metaqueue/selector"
	"github.com/mq-hpc/mq/protocol"
)

// Hold keeps jobs from running until Release: Waiting and Queued ones
// become Held. Their targets stay incomplete, so dependents wait.
func (s *Store) Hold(ctx context.Context, sel protocol.Select) (protocol.ActionReply, error) {
	return s.actOnSelected(ctx, sel, selector.Hold, s.hold)
}

// Release lets held jobs run: each becomes Queued, Waiting or Blocked as
// its prerequisites say.
func (s *Store) Release(ctx context.Context, sel protocol.Select) (protocol.ActionReply, error) {
	return s.actOnSelected(ctx, sel, selector.Release, s.release)
}
