package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/internal/metaqueue/sharedenv"
)

// A bulk submission's shared environment is a module
// (internal/metaqueue/sharedenv): stored once for the commit's ids, laid
// under each job's own at the claim.

// saveSharedEnv records env (JSON) for the bulk commit's ids first..last.
func (s *Store) saveSharedEnv(first, last int64, env string) error {
	return storeErr(sharedenv.Save(context.Background(), s.w, first, last, env))
}
