package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCreateExportMode: mqstat -O FILE leaves FILE with the mode the
// shell's > would, as cls files get does: a new file 0666 less the
// umask, an existing one its own mode, never the temporary file's 0600.
// Not parallel: the umask is the process's.
func TestCreateExportMode(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	for _, tc := range []struct {
		name     string
		existing fs.FileMode // 0: FILE does not exist yet
		want     fs.FileMode
	}{
		{"new file", 0, 0o640},
		{"existing group-writable", 0o664, 0o664},
		{"existing private", 0o600, 0o600},
		{"existing executable", 0o755, 0o755},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "export.txt")
			if tc.existing != 0 {
				if err := os.WriteFile(p, []byte("old\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			f, commit, _, err := createExport(p)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("export\n")
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tc.want {
				t.Errorf("mode %04o, want %04o", got, tc.want)
			}
			if b, _ := os.ReadFile(p); string(b) != "export\n" {
				t.Errorf("holds %q", b)
			}
		})
	}
}
