package pathguard

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzResolve: Resolve of any path under a tree of links (relative,
// absolute, up, chained, looping, dangling) neither panics nor hangs,
// and where the path names a directory it agrees with the kernel's
// resolution (filepath.EvalSymlinks).
func FuzzResolve(f *testing.F) {
	root, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			f.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "file"), nil, 0o600)
	for link, to := range map[string]string{
		"rel": "a/b", "abs": filepath.Join(root, "c"), "a/up": "../c", "a/b/top": "../../..",
		"chain": "rel", "loop1": "loop2", "loop2": "loop1", "gone": "nothing/here", "f": "file",
	} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			f.Fatal(err)
		}
	}
	for _, s := range []string{"rel", "abs/x", "a/up/..", "chain/../b", "a/b/top/c", "loop1/x", "gone/x", "f/x", "../../..", "a/./b//top/../c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		p = root + "/" + p
		got, err := Resolve(p)
		if err != nil {
			return
		}
		want, err := filepath.EvalSymlinks(p)
		if err != nil {
			return
		}
		if fi, err := os.Stat(want); err == nil && fi.IsDir() && got != want {
			t.Fatalf("Resolve(%q) = %q, the kernel's %q", p, got, want)
		}
	})
}
