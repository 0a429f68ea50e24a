package cls

import (
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/mq-hpc/mq/internal/mqhome"
)

// logFile is cls.log, reopened by path on ReopenLog (SIGHUP) so that
// logrotate can move it away: writes go to the new file from then on.
type logFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func openLogFile(path string) (*logFile, error) {
	f, err := mqhome.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open the log: %w", err)
	}
	return &logFile{path: path, f: f}, nil
}

func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

// reopen opens the path anew; on failure the old file stays in use.
func (l *logFile) reopen() error {
	f, err := mqhome.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("cannot reopen the log: %w", err)
	}
	l.mu.Lock()
	old := l.f
	l.f = f
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
