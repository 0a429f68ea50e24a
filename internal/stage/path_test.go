package stage

import (
	"errors"
	"path"
	"strings"
	"testing"
)

func TestRooted(t *testing.T) {
	for _, c := range []struct {
		root, p, want string
	}{
		{"", "/a/b", "/a/b"},
		{"/", "/a/b", "/a/b"},
		{"/data", "/a/b", "/data/a/b"},
		{"/data/", "//a//b/", "/data/a/b"},
		{"/data", "/a/./b", "/data/a/b"},
		{".mq-data/cls1", "/home/u/x.fa", ".mq-data/cls1/home/u/x.fa"},
		{".", "/x", "./x"},
		{"/data", "/a..b/..c", "/data/a..b/..c"},
	} {
		got, err := Rooted(c.root, c.p)
		if err != nil || got != c.want {
			t.Errorf("Rooted(%q, %q) = %q, %v; want %q", c.root, c.p, got, err, c.want)
		}
	}
	for _, c := range []struct{ root, p string }{
		{"/data", ""},
		{"/data", "a/b"},
		{"/data", "/"},
		{"/data", "//"},
		{"/data", "/.."},
		{"/data", "/../etc/passwd"},
		{"/data", "/a/../../etc"},
		{"/data", "/a/../b"},
		{"/data", "/a/.."},
		{"/data", "/a\x00b"},
		{"/da\x00ta", "/a"},
		{"../x", "/a"},
	} {
		if got, err := Rooted(c.root, c.p); !errors.Is(err, ErrPath) {
			t.Errorf("Rooted(%q, %q) = %q, %v; want ErrPath", c.root, c.p, got, err)
		}
	}
}

func FuzzRooted(f *testing.F) {
	for _, s := range [][2]string{
		{"/data", "/a/b"}, {"", "/x"}, {"/", "/../etc"}, {".mq-data/c", "/a/./b/"},
		{"/r", "/a/../../b"}, {"/r", "//..//x"}, {"rel", "/a\x00"}, {"/r/", "/.../..."},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, root, p string) {
		got, err := Rooted(root, p)
		if err != nil {
			if !errors.Is(err, ErrPath) {
				t.Fatalf("Rooted(%q, %q): error %v is not ErrPath", root, p, err)
			}
			return
		}
		prefix := "/"
		if root != "" && path.Clean(root) != "/" {
			prefix = path.Clean(root) + "/"
		}
		rest, ok := strings.CutPrefix(got, prefix)
		switch {
		case !ok:
			t.Fatalf("Rooted(%q, %q) = %q, not below %q", root, p, got, prefix)
		case rest == "" || rest == ".":
			t.Fatalf("Rooted(%q, %q) = %q names the root itself", root, p, got)
		case hasDotDot(got) || hasDotDot(rest):
			t.Fatalf("Rooted(%q, %q) = %q holds ..", root, p, got)
		case strings.IndexByte(got, 0) >= 0:
			t.Fatalf("Rooted(%q, %q) = %q holds NUL", root, p, got)
		case path.Clean(rest) != rest || strings.HasPrefix(rest, "/"):
			t.Fatalf("Rooted(%q, %q) = %q: %q is not clean and relative", root, p, got, rest)
		case path.Join(prefix, rest) != path.Clean(got):
			t.Fatalf("Rooted(%q, %q) = %q does not join back", root, p, got)
		}
		// What the path names within the root is what p names from "/".
		if want := path.Clean(p)[1:]; rest != want {
			t.Fatalf("Rooted(%q, %q) = %q, want %q below the root", root, p, got, want)
		}
	})
}
