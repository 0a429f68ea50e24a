package pathguard

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestResolve: Resolve follows our links as the kernel does (relative,
// absolute, through "..", chained) and keeps a missing tail as it is; a
// loop of links, or a file where a directory should be, is an error.
func TestResolve(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{
		"rel":   "a/b",
		"abs":   filepath.Join(root, "c"),
		"a/up":  "../c",
		"chain": "rel",
		"loop1": "loop2",
		"loop2": "loop1",
	} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"rel", "a/b"},
		{"abs/x", "c/x"},
		{"a/up", "c"},
		{"chain/../b", "a/b"},
		{"rel/new/deeper", "a/b/new/deeper"},
		{"./a//b/.", "a/b"},
	} {
		got, err := Resolve(root + "/" + c.in) // not cleaned: ".." after a link is the kernel's
		if want := filepath.Join(root, c.want); err != nil || got != want {
			t.Errorf("Resolve(%s) = %q, %v; want %q", c.in, got, err, want)
		}
	}
	os.WriteFile(filepath.Join(root, "file"), nil, 0o600)
	for _, bad := range []string{"loop1", "file/x", "file"} {
		if got, err := Resolve(filepath.Join(root, bad)); err == nil {
			t.Errorf("Resolve(%s) = %q, want an error", bad, got)
		}
	}
	t.Chdir(root)
	if got, err := Resolve("chain/new"); err != nil || got != filepath.Join(root, "a/b/new") {
		t.Errorf("Resolve(chain/new) in %s = %q, %v", root, got, err)
	}
	fd, err := OpenDir(filepath.Join(root, "chain"))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var got, want unix.Stat_t
	unix.Fstat(fd, &got)
	unix.Stat(filepath.Join(root, "a/b"), &want)
	if got.Ino != want.Ino {
		t.Errorf("OpenDir(chain) opened inode %d, want a/b's %d", got.Ino, want.Ino)
	}
}
