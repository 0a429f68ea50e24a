package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/internal/metaqueue/extents"
	"github.com/mq-hpc/mq/protocol"
)

// Output extents are a module (internal/metaqueue/extents): where an
// attempt's outputs lie in its placeholder's stream files.

// saveStreamed records, in the transaction of the attempt's end, where
// r's outputs lie in placeholder ph's stream files.
func (s *Store) saveStreamed(ph int64, r protocol.Report) error {
	if err := s.begin(); err != nil {
		return err
	}
	if err := extents.Save(context.Background(), s.w, ph, r); err != nil {
		return fatalError{err}
	}
	return nil
}
