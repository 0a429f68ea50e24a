package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/protocol"
)

// saveOutputLost records, on the core, why an attempt's output was lost;
// the first cause recorded stays.
func (s *Store) saveOutputLost(id int64, attempt int, why string) error {
	if err := s.begin(); err != nil {
		return err
	}
	if _, err := s.w.ExecContext(context.Background(), attemptsSQL.Get("InsertOutputLost"), id, attempt, why); err != nil {
		return fatalError{err}
	}
	return nil
}

// OutputLost records that the CLS could not keep the output a placeholder
// staged for an attempt it holds (staging failed: a full disk, an I/O
// error). A placeholder that does not hold the attempt changes nothing.
func (s *Store) OutputLost(ctx context.Context, placeholder, id int64, attempt int, why string) error {
	why = protocol.ClipText(why, protocol.MaxReasonBytes)
	return s.do(ctx, func() error {
		if s.runOf(id, attempt, placeholder) == nil {
			return nil
		}
		return s.saveOutputLost(id, attempt, why)
	})
}
