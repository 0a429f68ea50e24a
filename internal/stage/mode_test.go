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

// TestIdentityUserUmask: the CLS runs under umask 077, but what it stages
// to its own host's files (Dir.Umask set: the user's) is made as the
// user's other files are: 0644 and 0755 under umask 022, the directories
// it made and no other.
func TestIdentityUserUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "in"), []byte("hello"))
	top := t.TempDir()
	if err := os.Chmod(top, 0o750); err != nil {
		t.Fatal(err)
	}
	user := fs.FileMode(0o022)
	dst := filepath.Join(top, "new/deeper/out")
	m := Mover{Places: places{"a": Dir{Root: src}, "b": renamedDir2{Dir{Root: "/", Umask: &user}, dst}}.get}
	if res := m.Move(context.Background(), Transfer{Path: "/in", From: "a", To: "b", Size: 5}); res.Err != nil {
		t.Fatal(res.Err)
	}
	for p, want := range map[string]fs.FileMode{
		top: 0o750, filepath.Join(top, "new"): 0o755, filepath.Join(top, "new/deeper"): 0o755, dst: 0o644,
	} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", p, got, want)
		}
	}
}

// renamedDir2 is renamedDir with a Dir of its own.
type renamedDir2 struct {
	d  Dir
	to string
}

func (r renamedDir2) Open(ctx context.Context, p string) (io.ReadCloser, Info, error) {
	return r.d.Open(ctx, r.to)
}
func (r renamedDir2) Stat(ctx context.Context, p string) (Info, error) { return r.d.Stat(ctx, r.to) }
func (r renamedDir2) Create(ctx context.Context, p string) (Temp, error) {
	return r.d.Create(ctx, r.to)
}
func (r renamedDir2) Remove(ctx context.Context, p string) error { return r.d.Remove(ctx, r.to) }

// A directory made for the user's umask that was replaced by a link
// before its mode was set leaves the link's target alone.
func TestUserModeFollowsNoLink(t *testing.T) {
	top := t.TempDir()
	target := filepath.Join(top, "private")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(top, "made")); err != nil {
		t.Fatal(err)
	}
	user := fs.FileMode(0o022)
	Dir{Root: "/", Umask: &user}.userMode([]string{filepath.Join(top, "made")[1:]}, 0o777)
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the link's target: %v %v, want it left 0700", fi.Mode(), err)
	}
}
