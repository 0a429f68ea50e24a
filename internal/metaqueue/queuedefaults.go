package metaqueue

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mq-hpc/mq/protocol"
)

// A queue's resource defaults (QueueInfo.Defaults) are stored apart from
// its other settings, one JSON row per queue that has them: the request
// type may grow without a migration per field.

// saveQueueDefaults stores q's defaults r in the open transaction; the
// zero request removes them.
func (s *Store) saveQueueDefaults(q *queue, r protocol.Resources) error {
	if !r.Asks() {
		if _, err := s.w.ExecContext(context.Background(), queuesSQL.Get("DeleteDefaults"), q.id); err != nil {
			return fatalError{err}
		}
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := s.w.ExecContext(context.Background(), queuesSQL.Get("SetDefaults"), q.id, string(b)); err != nil {
		return fatalError{err}
	}
	return nil
}

// loadQueueDefaults gives each loaded queue its stored defaults.
func (s *Store) loadQueueDefaults(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, queuesSQL.Get("LoadDefaults"))
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int32
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			rows.Close()
			return err
		}
		q := s.queueIDs[id]
		if q == nil {
			continue
		}
		var r protocol.Resources
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			rows.Close()
			return fmt.Errorf("queue %s: stored resource defaults: %w", q.Name, err)
		}
		q.Defaults = r
	}
	return closeRows(rows)
}
