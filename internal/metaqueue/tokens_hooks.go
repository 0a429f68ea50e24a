package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/internal/metaqueue/tokens"
)

// Submit tokens are a module (internal/metaqueue/tokens): a submit or bulk
// commit with a token is made once however often it is resent.

// tokenIDs returns the ids of an earlier submit with this token, or nil.
func (s *Store) tokenIDs(token string) ([]int64, error) {
	ids, err := tokens.IDs(context.Background(), s.w, token)
	if err != nil {
		return nil, fatalError{err}
	}
	return ids, nil
}

// pruneTokens forgets old tokens, at most once an hour (the core calls it
// on its tick).
func (s *Store) pruneTokens() error {
	now := s.now()
	if !s.tokensPruned.Due(now) || s.room.Short() { // no write can go through: later
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	return storeErr(tokens.Prune(context.Background(), s.w, now))
}
