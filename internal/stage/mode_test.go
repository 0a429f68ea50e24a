package stage

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestStagedFilesPrivate: what a transfer makes below a data root (the
// root, the directories, the file) is 0700 and 0600 whatever the umask,
// for a Dir and over SFTP; the CLS host's own files (the identity) keep
// following the umask.
func TestStagedFilesPrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a/b/in"), []byte("hello"))
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			m := Mover{Places: places{"a": Dir{Root: src}, "b": k.make(t, root)}.get}
			if res := m.Move(context.Background(), Transfer{Path: "/a/b/in", From: "a", To: "b", Size: 5}); res.Err != nil {
				t.Fatal(res.Err)
			}
			for p, want := range map[string]fs.FileMode{
				root: 0o700, root + "/a": 0o700, root + "/a/b": 0o700, root + "/a/b/in": 0o600,
			} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != want {
					t.Errorf("%s: mode %04o, want %04o", p, got, want)
				}
			}
		})
	}
	t.Run("identity", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "mine")
		m := Mover{Places: places{"a": Dir{Root: src}, "b": renamedDir{dst}}.get}
		if res := m.Move(context.Background(), Transfer{Path: "/a/b/in", From: "a", To: "b", Size: 5}); res.Err != nil {
			t.Fatal(res.Err)
		}
		fi, err := os.Stat(dst)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o666 {
			t.Errorf("%s: mode %04o, want 0666 (umask 0)", dst, got)
		}
	})
}

// renamedDir is the CLS host's filesystem with every file created at to.
type renamedDir struct{ to string }

func (r renamedDir) Open(ctx context.Context, p string) (io.ReadCloser, Info, error) {
	return Dir{}.Open(ctx, r.to)
}
func (r renamedDir) Stat(ctx context.Context, p string) (Info, error) { return Dir{}.Stat(ctx, r.to) }
func (r renamedDir) Create(ctx context.Context, p string) (Temp, error) {
	return Dir{}.Create(ctx, r.to)
}
func (r renamedDir) Remove(ctx context.Context, p string) error { return Dir{}.Remove(ctx, r.to) }
