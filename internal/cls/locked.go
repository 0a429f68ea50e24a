package cls

import (
	"context"
	"fmt"
	"io"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/internal/sqlitedb"
)

// noteLocked says, in one line on w, that the CLS starts while another
// process holds the write lock of db: it serves, reads go on, and changes
// are refused until the lock is let go (the store looks at it again
// every tenth of a second at most).
func noteLocked(ctx context.Context, db string, w io.Writer) {
	if err := sqlitedb.WriteLockFree(ctx, db); batchfail.IsLocked(err) {
		fmt.Fprintf(w, "cls: warning: another process holds the write lock of %s (an sqlite3 shell left in a transaction? fuser -v %s* names it): serving, but changes are refused until it ends its transaction\n", db, db)
	}
}
