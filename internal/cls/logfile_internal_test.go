package cls

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cls.log is moved to cls.log.1 when a write would take it past its
// bound, so the log takes at most twice the bound whatever is written.
func TestLogFileRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cls.log")
	const max = 4096
	l, err := openLogFile(path, max)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	line := strings.Repeat("x", 99) + "\n"
	for range 1000 { // 100 KB
		if _, err := l.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	var total int64
	for _, name := range []string{"cls.log", "cls.log.1"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > max || fi.Size() == 0 {
			t.Errorf("%s is %d bytes; want 1..%d", name, fi.Size(), max)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, fi.Mode().Perm())
		}
		total += fi.Size()
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d files in the directory, want cls.log and cls.log.1", len(ents))
	}
	// Reopened (SIGHUP) on an existing file, its size counts.
	if err := l.reopen(); err != nil {
		t.Fatal(err)
	}
	if l.size == 0 {
		t.Error("a reopened log's size was not read")
	}
}
