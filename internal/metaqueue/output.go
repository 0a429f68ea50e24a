package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/internal/metaqueue/extents"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/protocol"
)

// saveOutputs records where r's outputs lie in placeholder ph's stream
// files and why they were lost (module extents; save is extents.Save or
// SaveDeleted), unless r is a hand-back or names none: then nothing is written.
func (s *Store) saveOutputs(ph int64, r protocol.Report, save func(context.Context, extents.Execer, int64, protocol.Report) error) error {
	if r.OutputLost == "" && len(r.Streamed) == 0 || r.Reason == protocol.ReasonReturned {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	if err := save(context.Background(), s.w, ph, r); err != nil {
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
		if runs.Find(s.running[id], s.copyRuns[id], attempt, placeholder) == nil {
			return nil
		}
		if err := s.beginFresh(); err != nil {
			return err
		}
		return storeErr(extents.Lost(context.Background(), s.w, id, attempt, why))
	})
}
