package purge

import "context"

// StorageError is a failure of the core's database met inside a batch:
// the core rolls its batch back.
type StorageError struct{ Err error }

func (e *StorageError) Error() string { return e.Err.Error() }
func (e *StorageError) Unwrap() error { return e.Err }

// runBatch plans and deletes rows in one durable call on the core (dry:
// only plans) and returns the jobs gone and how many were kept.
func runBatch(ctx context.Context, c Core, sc Scope, rows []Row, dry bool) (gone []Row, kept int64, err error) {
	err = c.Write(ctx, !dry, func(b Batch) error {
		p, err := PlanBatch(context.Background(), b.DB(), b, sc, rows)
		if err != nil {
			return &StorageError{err}
		}
		gone, kept = p.Go, p.Kept // afresh if tried again
		if dry || len(p.Go) == 0 {
			return nil
		}
		if err := b.Begin(); err != nil {
			return err
		}
		d, err := Delete(context.Background(), b.DB(), p, sc, b.NextID())
		if err != nil {
			return &StorageError{err}
		}
		for _, e := range d.Ended {
			b.Forget(e)
		}
		gone = d.Gone
		return nil
	})
	return gone, kept, err
}
