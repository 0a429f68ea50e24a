package cls

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/internal/sqlitedb"
	"github.com/mq-hpc/mq/protocol"
)

// A placeholder id is never given twice (schema version 33 keeps the
// highest given), but a database upgraded to it could only start from
// the ids it still named: a placeholder swept before, whose jobs were
// purged, left only its stream copies in the streams directory, and a
// new placeholder given its id would inherit them (its first piece
// refused, its output lost). As the CLS opens, the mark is raised above
// the largest id among the copies' names.

// largestStreamOwner is the largest placeholder id among the names of the
// stream copies in dir, 0 if none (or no dir).
func largestStreamOwner(dir string) (int64, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	defer f.Close()
	var largest int64
	for {
		es, err := f.ReadDir(4096) // a directory of many copies is read a slice at a time
		for _, e := range es {
			if ph, ok := protocol.StreamFileOwner(e.Name()); ok {
				largest = max(largest, ph)
			}
		}
		if err == io.EOF {
			return largest, nil
		} else if err != nil {
			return largest, err
		}
	}
}

// raiseStreamMark raises db's placeholder id mark above the ids of the
// stream copies in dir. The store is open: no placeholder registers
// before the socket listens, and InsertPlaceholder reads the mark each
// time. It waits at most a second for the write lock (the store's own
// batch); another process holding it is said by noteLocked.
func raiseStreamMark(ctx context.Context, db, dir string) error {
	largest, err := largestStreamOwner(dir)
	if err != nil || largest == 0 {
		return err
	}
	return sqlitedb.WithConn(ctx, db, time.Second, func(c *sql.Conn) error {
		return placeholders.RaiseLast(ctx, c, largest)
	})
}
