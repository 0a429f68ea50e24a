// Package extents records where job attempts' stdout and stderr lie in
// their placeholders' stream files (the output_extents table): the index
// mqstat --cat reads outputs through when placeholders write streams
// instead of a file per output.
//
// The metaqueue's core calls Save in the transaction of an attempt's end,
// through its writer; the read side (package inspect) reads the table.
package extents

import (
	"context"
	"database/sql"
	_ "embed"

	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed extents.sql
var extentsSQL string

var queries = sqlfile.MustParse("extents.sql", extentsSQL)

// Execer is the core's writer.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Save records the extents of report r, sent by placeholder ph. An entry
// that is malformed or names a file that is not ph's own is not kept:
// the CLS reads the file a record names, and a placeholder must not make
// it read another's (or any other file). A report sent again changes
// nothing.
func Save(ctx context.Context, ex Execer, ph int64, r protocol.Report) error {
	for _, st := range r.Streamed {
		if protocol.CheckStreamed(st) != nil {
			continue
		}
		if owner, _ := protocol.StreamFileOwner(st.File); owner != ph {
			continue
		}
		stream := 0
		if st.Stream == "stderr" {
			stream = 1
		}
		if _, err := ex.ExecContext(ctx, queries.Get("InsertStreamed"), r.ID, r.Attempt, stream, ph, st.File, st.Last, st.Bytes, st.Cut); err != nil {
			return err
		}
	}
	return nil
}
