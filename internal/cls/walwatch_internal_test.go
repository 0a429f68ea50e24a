package cls

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWALWatch: a WAL past walWarnAt is warned of once, naming the likely
// cause; again when it has doubled; its return under walWarnAt is said
// once.
func TestWALWatch(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	db := filepath.Join(t.TempDir(), "mq.db")
	w := newWALWatch(db, slog.New(slog.NewTextHandler(&logs, nil)))
	w.check() // no WAL yet: nothing to say
	if err := os.WriteFile(db+"-wal", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		size  int64 // sparse: no disk used
		warns int   // so far
		backs int
	}{
		{4 << 20, 0, 0},
		{walWarnAt, 1, 0},
		{walWarnAt + 1<<20, 1, 0},
		{2 * walWarnAt, 2, 0},
		{2 * walWarnAt, 2, 0},
		{64 << 20, 2, 1},
		{64 << 20, 2, 1},
	} {
		if err := os.Truncate(db+"-wal", step.size); err != nil {
			t.Fatal(err)
		}
		w.check()
		if got := strings.Count(logs.String(), "another process most likely holds a read transaction"); got != step.warns {
			t.Errorf("at %d MiB: %d warnings, want %d", step.size>>20, got, step.warns)
		}
		if got := strings.Count(logs.String(), "small again"); got != step.backs {
			t.Errorf("at %d MiB: %d back, want %d", step.size>>20, got, step.backs)
		}
	}
}
