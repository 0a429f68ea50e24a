package cls

import (
	"log/slog"
	"os"
)

// walWarnAt is the size of mq.db-wal first warned of. SQLite checkpoints
// the WAL back into the database every 1,000 pages (4 MiB), so it grows
// past this only when checkpoints cannot finish: another process holds a
// read transaction open on the database.
const walWarnAt = 256 << 20

// walWatch warns, in the CLS's log, when the database's WAL keeps
// growing, naming the likely cause; again each time it doubles, and once
// when it is back under walWarnAt (the database's journal_size_limit
// truncates it once a checkpoint finishes).
type walWatch struct {
	path string // the WAL: mq.db-wal
	log  *slog.Logger
	next int64 // the size to warn at next
}

func newWALWatch(db string, log *slog.Logger) *walWatch {
	return &walWatch{path: db + "-wal", log: log, next: walWarnAt}
}

// check looks at the WAL's size once.
func (w *walWatch) check() {
	fi, err := os.Stat(w.path)
	if err != nil {
		return
	}
	switch size := fi.Size(); {
	case size >= w.next:
		w.log.Warn("the database's WAL keeps growing: another process most likely holds a read transaction open on the database (an sqlite3 shell left in BEGIN, a long query), which stops checkpoints; end it (fuser -v names the processes that have the file open)",
			"wal", w.path, "MiB", size>>20)
		for w.next <= size {
			w.next *= 2
		}
	case size < walWarnAt && w.next > walWarnAt:
		w.log.Info("the database's WAL is small again", "wal", w.path, "MiB", size>>20)
		w.next = walWarnAt
	}
}
