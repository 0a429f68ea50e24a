package cls

import (
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/mq-hpc/mq/internal/mqhome"
)

// DefaultLogMax is how large cls.log grows before it is moved to
// cls.log.1 (replacing the one before) and started anew: the CLS's log
// takes at most twice this of MQ_HOME's disk, whatever its peers do.
const DefaultLogMax = 16 << 20

// logFile is cls.log, reopened by path on ReopenLog (SIGHUP) so that
// logrotate can move it away: writes go to the new file from then on. A
// write that would take it past max moves it to cls.log.1 first.
type logFile struct {
	path string
	max  int64 // 0: no bound
	mu   sync.Mutex
	f    *os.File
	size int64 // bytes in f: at open, plus what we wrote
}

func openLogFile(path string, max int64) (*logFile, error) {
	l := &logFile{path: path, max: max}
	f, size, err := l.open()
	if err != nil {
		return nil, fmt.Errorf("cannot open the log: %w", err)
	}
	l.f, l.size = f, size
	return l, nil
}

func (l *logFile) open() (*os.File, int64, error) {
	f, err := mqhome.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.size > 0 && l.size+int64(len(p)) > l.max {
		l.rotateLocked()
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// rotateLocked moves the file to path.1 and opens a new one. If it
// cannot, writes go on to the file in use and the next write tries again.
func (l *logFile) rotateLocked() {
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return
	}
	f, size, err := l.open()
	if err != nil {
		return // the old file, now path.1, stays in use
	}
	l.f.Close()
	l.f, l.size = f, size
}

// reopen opens the path anew; on failure the old file stays in use.
func (l *logFile) reopen() error {
	f, size, err := l.open()
	if err != nil {
		return fmt.Errorf("cannot reopen the log: %w", err)
	}
	l.mu.Lock()
	old := l.f
	l.f, l.size = f, size
	l.mu.Unlock()
	return old.Close()
}

func (l *logFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// newLogger makes the CLS's logger in format text or json.
func newLogger(w *logFile, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q is not text or json", format)
}

// ReopenLog reopens cls.log (after logrotate moved it: cls serve does it
// on SIGHUP). Local placeholders started before keep writing their own
// lines to the old file until they are replaced.
func (c *CLS) ReopenLog() error {
	if err := c.logf.reopen(); err != nil {
		return err
	}
	c.log.Info("log reopened")
	return nil
}

// file is the log file now: a local placeholder gets it as its stdout and
// stderr (the file itself, not a pipe through the CLS), so one started
// before a reopen keeps the old file until it is replaced.
func (l *logFile) file() *os.File {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f
}
