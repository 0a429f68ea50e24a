package stage

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// escapeParts are the names FuzzPlaceNoEscape builds paths from: the
// links of its tree (in: inside the root; out, up, fl: leading out of
// it), files and directories on both sides, and "." and "..".
var escapeParts = []string{"a", "in", "out", "up", "fl", "f", "secret", "new", "sub", ".", "..", ""}

// FuzzPlaceNoEscape fuzzes the path rule against symbolic links on both
// kinds of place a transfer reads from or writes to (Dir, over os.Root,
// and SFTP): whatever the path, Open and Stat never reach a file outside
// the data root, and Create, Commit and Remove never make, change or
// remove anything outside it. The root holds a link inside it (in -> a),
// links out of it (out -> the outside directory, a/up -> ../.., fl -> the
// outside secret), and the outside directory sits beside the root, where
// ".." and the relative link lead. The path is the raw string, and also
// one made of escapeParts chosen by sel.
func FuzzPlaceNoEscape(f *testing.F) {
	for _, s := range []struct {
		raw string
		sel []byte
	}{
		{"/in/f", []byte{1, 5}},
		{"/out/secret", []byte{2, 6}},
		{"/a/up/outside/secret", []byte{0, 3, 6}},
		{"/fl", []byte{4}},
		{"/out/new", []byte{2, 7}},
		{"/a/../out/secret", []byte{0, 10, 2, 6}},
		{"/out/sub/new", []byte{2, 8, 7}},
		{"/a/up/outside/new", []byte{0, 3, 9, 7}},
	} {
		f.Add(s.raw, s.sel)
	}
	base := f.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	writeFile(f, filepath.Join(outside, "secret"), []byte("SECRET-OUTSIDE"))
	writeFile(f, filepath.Join(outside, "f"), []byte("SECRET-OUTSIDE"))
	must(f, os.Mkdir(filepath.Join(outside, "sub"), 0o755))
	// The root's tree, made again before each path: a Remove inside the
	// root may legitimately take a link away.
	links := [][2]string{{"a", "in"}, {outside, "out"}, {"../..", "a/up"}, {filepath.Join(outside, "secret"), "fl"}}
	plant := func(tb testing.TB) {
		if _, err := os.Lstat(filepath.Join(root, "a", "f")); err != nil {
			writeFile(tb, filepath.Join(root, "a", "f"), []byte("inside"))
		}
		for _, l := range links {
			name := filepath.Join(root, l[1])
			if fi, err := os.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				continue
			}
			os.RemoveAll(name)
			must(tb, os.Symlink(l[0], name))
		}
	}
	plant(f)
	want := tree(f, base, root)
	ps := []Place{Dir{Root: root}, SFTP{Client: sftpClient(f), Root: root, Writer: "fuzz"}}
	ctx := context.Background()

	f.Fuzz(func(t *testing.T, raw string, sel []byte) {
		names := []string{raw}
		if len(sel) > 0 && len(sel) <= 8 {
			parts := make([]string, len(sel))
			for i, b := range sel {
				parts[i] = escapeParts[int(b)%len(escapeParts)]
			}
			names = append(names, "/"+strings.Join(parts, "/"))
		}
		for _, p := range ps {
			for _, name := range names {
				plant(t)
				if r, _, err := p.Open(ctx, name); err == nil {
					b, _ := io.ReadAll(io.LimitReader(r, 64))
					r.Close()
					if strings.Contains(string(b), "SECRET") {
						t.Fatalf("%T Open(%q) read a file outside the root", p, name)
					}
				}
				if tmp, err := p.Create(ctx, name); err == nil {
					tmp.Write([]byte("written"))
					tmp.Commit(ctx)
				}
				p.Remove(ctx, name)
				if got := tree(t, base, root); !slices.Equal(got, want) {
					t.Fatalf("%T with %q changed what lies outside the root:\n got %q\nwant %q", p, name, got, want)
				}
			}
		}
	})
}

// tree lists what lies under base outside root (names, kinds and file
// contents), to see that nothing there changed.
func tree(tb testing.TB, base, root string) []string {
	tb.Helper()
	var out []string
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return filepath.SkipDir
		}
		entry := p + " " + d.Type().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			entry += " " + string(b)
		}
		out = append(out, entry)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
