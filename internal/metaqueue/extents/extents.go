// Package extents records where job attempts' stdout and stderr lie in
// their placeholders' stream files (the output_extents table): the index
// mqstat --cat reads outputs through when placeholders write streams
// instead of a file per output; and why an attempt's output was lost
// (output_lost).
//
// The metaqueue's core calls Save in the transaction of an attempt's end,
// and Lost when the CLS could not keep a staged output, through its
// writer; the read side (package inspect) reads the tables.
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

// Lost records why attempt's output of job id was lost; the first cause
// recorded stays.
func Lost(ctx context.Context, ex Execer, id int64, attempt int, why string) error {
	_, err := ex.ExecContext(ctx, queries.Get("InsertOutputLost"), id, attempt, why)
	return err
}

// Save records the extents of report r, sent by placeholder ph, and why
// its output was lost if it says. An entry
// that is malformed or names a file that is not ph's own is not kept:
// the CLS reads the file a record names, and a placeholder must not make
// it read another's (or any other file). A report sent again changes
// nothing.
func Save(ctx context.Context, ex Execer, ph int64, r protocol.Report) error {
	return save(ctx, ex, ph, r, "InsertStreamed")
}

// SaveDeleted is Save for a report that came after its job was deleted
// (mqdel kills an executing job; its placeholder reports it then, and the
// core no longer holds the attempt): its extents are kept if the job's
// row says ph ran that attempt, so mqstat --cat shows what it wrote. A
// report of no extents (late, or a duplicate) changes nothing.
func SaveDeleted(ctx context.Context, ex Execer, ph int64, r protocol.Report) error {
	r.OutputLost = "" // not checked against the row, so not kept
	return save(ctx, ex, ph, r, "InsertStreamedDeleted")
}

func save(ctx context.Context, ex Execer, ph int64, r protocol.Report, insert string) error {
	if r.OutputLost != "" {
		if err := Lost(ctx, ex, r.ID, r.Attempt, r.OutputLost); err != nil {
			return err
		}
	}
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
		if _, err := ex.ExecContext(ctx, queries.Get(insert), r.ID, r.Attempt, stream, ph, st.File, st.Last, st.Bytes, st.Cut); err != nil {
			return err
		}
	}
	return nil
}
