package metaqueue

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"runtime/debug"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/upload"
	"github.com/mq-hpc/mq/internal/metaqueue/sharedenv"
	"github.com/mq-hpc/mq/internal/metaqueue/spool"
	"github.com/mq-hpc/mq/internal/metaqueue/tokens"
	"github.com/mq-hpc/mq/protocol"
)

// Bulk is a submission too large for one request (`mqsub -f`). Its upload
// (package upload) checks and spools chunks as they arrive, so the core is
// not held while a client uploads; Commit then adds every job in one
// transaction.
type Bulk struct {
	*upload.Upload
	s *Store
}

// bigCommit is the size of a bulk commit after which the heap is given
// back to the OS at once.
const bigCommit = 100000

// NewBulk starts a bulk submission.
func (s *Store) NewBulk() (*Bulk, error) {
	dir := s.opt.SpoolDir
	if dir == "" {
		dir = filepath.Dir(s.opt.Path)
	}
	u, err := upload.New(dir, cmp.Or(s.opt.MaxBulkJobs, upload.DefaultMaxJobs), cmp.Or(s.opt.MaxBulkBytes, upload.DefaultMaxBytes))
	if err != nil {
		return nil, err
	}
	return &Bulk{Upload: u, s: s}, nil
}

// Commit adds every spooled job in one transaction and returns the first id;
// ids are contiguous. The Bulk is finished either way.
func (b *Bulk) Commit(ctx context.Context) (first int64, err error) {
	first, _, err = b.CommitToken(ctx, "")
	return first, err
}

// CommitToken is Commit with an idempotency token (empty: none), recorded in
// the commit's transaction. If a commit with this token was already made,
// nothing is added and that commit's ids are returned: a client whose
// connection died during the commit may upload again and commit with the
// same token, whichever of the two commits runs first. count is the number
// of jobs the returned ids cover.
func (b *Bulk) CommitToken(ctx context.Context, token string) (first int64, count int, err error) {
	defer b.Spool.Close()
	if b.N == 0 {
		return 0, 0, protocol.Errorf(protocol.CodeBadRequest, "no jobs to submit")
	}
	if err := tokens.Check(token); err != nil {
		return 0, 0, err
	}
	if err := b.Spool.Flush(); err != nil {
		return 0, 0, err
	}
	s := b.s
	inserted := false
	err = s.doNeedingRoom(ctx, call{durable: true, slow: true}, func() error {
		if done, err := s.tokenIDs(token); err != nil || done != nil {
			if len(done) > 0 {
				first, count = done[0], len(done)
			}
			return err
		}
		r, err := b.Spool.Rewind()
		if err != nil {
			return err
		}
		if c := s.g.FindCycleIn(b.Specs.Edges); c != "" {
			return protocol.Errorf(protocol.CodeBadRequest, "prerequisites would form a cycle: %s", c)
		}
		// Checked: the edge set (a string and a slice per target, 5,000,000
		// with as many pipelines) goes before the graph and the rows grow,
		// and collections during the insert no longer scan it.
		free := b.Specs.Free
		b.Specs = nil
		for name, n := range free {
			// An array's members are released a few at a time (its cap).
			if q := s.queues[name]; q != nil && !b.IsArray {
				q.ready.Grow(n)
			}
		}
		first, count = s.nextID, b.N
		// The array first, so that its members count in it as they enter.
		if b.IsArray {
			if err := s.saveArray(first, first+int64(b.N)-1, b.ArraySpec, b.ArrayLimit); err != nil {
				return err
			}
		}
		ins := s.newInserter()
		var js protocol.JobSpec
		for i := 0; i < b.N; i++ {
			if err := spool.Read(r, &js); err != nil {
				// The spool is ours; a short read means the disk failed us.
				// Jobs may already be applied in memory: fail the batch.
				return fatalError{fmt.Errorf("bulk spool: %w", err)}
			}
			if err := ins.add(&js); err != nil {
				return err
			}
		}
		if err := ins.flush(); err != nil {
			return err
		}
		if b.Env != "" {
			if err := storeErr(sharedenv.Save(context.Background(), s.w, first, first+int64(b.N)-1, b.Env)); err != nil {
				return err
			}
		}
		inserted = true
		return storeErr(tokens.Save(context.Background(), s.w, token, first, b.N, s.now()))
	})
	if err == nil && inserted {
		// A large transaction filled the page cache; give the memory back.
		s.do(ctx, func() error {
			_, err := s.w.ExecContext(ctx, connSQL.Get("ShrinkMemory"))
			return err
		})
		if b.N >= bigCommit {
			// So did the commit's garbage (the spooled specs read back, the
			// edge set, grown tables): the heap peaked near twice what
			// stays live, and the runtime would hold that peak for minutes
			// (1,000,000 jobs). One collection is a small part of such a commit.
			debug.FreeOSMemory()
		}
	}
	return first, count, err
}

// BulkOutcome says whether a bulk commit (or submit) with token was
// committed, and if so its ids first..first+count-1. It goes through the
// core, so a commit already handed to the core is decided first.
func (s *Store) BulkOutcome(ctx context.Context, token string) (first int64, count int, found bool, err error) {
	if token == "" || len(token) > tokens.MaxLen {
		return 0, 0, false, protocol.Errorf(protocol.CodeBadRequest, "a token of 1 to %d bytes is needed", tokens.MaxLen)
	}
	err = s.do(ctx, func() error {
		ids, err := s.tokenIDs(token)
		if len(ids) > 0 {
			first, count, found = ids[0], len(ids), true
		}
		return err
	})
	return first, count, found, err
}
