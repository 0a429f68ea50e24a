package stage

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSFTPCheckRoot: a site's data root others can write, or inside a
// directory others can write, is refused; a private one, or one not made
// yet, is taken.
func TestSFTPCheckRoot(t *testing.T) {
	c := sftpClient(t)
	for _, tc := range []struct {
		name             string
		mode, parentMode fs.FileMode // 0: not made / 0700
		want             string
	}{
		{"private", 0o700, 0, ""},
		{"readable", 0o755, 0, ""},
		{"missing", 0, 0, ""},
		{"world-writable", 0o777, 0, "is writable by others (mode 0777): they could replace staged inputs; chmod 700"},
		{"group-writable", 0o770, 0, "(mode 0770)"},
		{"parent writable", 0o700, 0o777, "writable by others and not sticky"},
		{"parent sticky", 0o700, 0o777 | fs.ModeSticky, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "p")
			root := filepath.Join(parent, "root")
			must(t, os.MkdirAll(parent, 0o700))
			if tc.mode != 0 {
				must(t, os.Mkdir(root, 0o700))
				must(t, os.Chmod(root, tc.mode))
			}
			if tc.parentMode != 0 {
				must(t, os.Chmod(parent, tc.parentMode))
			}
			err := SFTP{Client: c, Root: root}.CheckRoot(context.Background())
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), root)):
				t.Fatalf("%v, want an error naming %s with %q", err, root, tc.want)
			}
			var unsafe *UnsafeRootError
			if tc.want != "" && !errors.As(err, &unsafe) {
				t.Fatalf("a refusal is %T, not an UnsafeRootError: the CLS would take it for a lost connection", err)
			}
		})
	}
}

// An error of the connection is no refusal: the CLS reports the site
// unreachable, as any transfer there would.
func TestSFTPCheckRootConnectionLost(t *testing.T) {
	c := sftpClient(t)
	c.Close()
	err := SFTP{Client: c, Root: "data"}.CheckRoot(context.Background())
	var unsafe *UnsafeRootError
	if err == nil || errors.As(err, &unsafe) {
		t.Fatalf("CheckRoot on a closed connection: %v, want an error that is not a refusal", err)
	}
}

// TestSFTPCheckRootForeignLink: a data root that is a symbolic link
// another user owns is refused, wherever it points, as the agent refuses
// it (mqhome.CheckPrivate): in a shared sticky directory such as
// /scratch, they could make /scratch/USER a link to a directory of the
// user's before the user made it, and later point it at another of the
// user's directories (staged inputs overwrite files there) or at one of
// their own (its "outputs" are theirs). One of the user's own is fine.
func TestSFTPCheckRootForeignLink(t *testing.T) {
	c := sftpClient(t)
	for _, tc := range []struct {
		name  string
		owner int // of the link; -1: the user's own
		want  string
	}{
		{"own link", -1, ""},
		{"another user's link", 65534, "a symbolic link owned by uid 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.owner >= 0 && os.Geteuid() != 0 {
				t.Skip("needs root to give the link to another user")
			}
			dir := t.TempDir()
			shared := filepath.Join(dir, "scratch")
			target := filepath.Join(dir, "mine")
			must(t, os.Mkdir(shared, 0o777|fs.ModeSticky))
			must(t, os.Chmod(shared, 0o777|fs.ModeSticky))
			must(t, os.Mkdir(target, 0o700))
			root := filepath.Join(shared, "user")
			must(t, os.Symlink(target, root))
			if tc.owner >= 0 {
				must(t, os.Lchown(root, tc.owner, tc.owner))
			}
			err := SFTP{Client: c, Root: root}.CheckRoot(context.Background())
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), root)):
				t.Fatalf("%v, want an error naming %s with %q", err, root, tc.want)
			}
			var unsafe *UnsafeRootError
			if tc.want != "" && !errors.As(err, &unsafe) {
				t.Fatalf("a refusal is %T, not an UnsafeRootError", err)
			}
		})
	}
}

// TestSFTPCheckRootThroughLink: a data root reached through a link of the
// user's is checked where it lies: a directory there that others may
// write and is not sticky could have it renamed away and replaced.
func TestSFTPCheckRootThroughLink(t *testing.T) {
	c := sftpClient(t)
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	must(t, os.Mkdir(open, 0o777))
	must(t, os.Chmod(open, 0o777))
	must(t, os.Mkdir(filepath.Join(open, "data"), 0o700))
	root := filepath.Join(dir, "link")
	must(t, os.Symlink("open/data", root)) // relative, as ln -s makes them
	err := SFTP{Client: c, Root: root}.CheckRoot(context.Background())
	var unsafe *UnsafeRootError
	if err == nil || !errors.As(err, &unsafe) || !strings.Contains(err.Error(), "writable by others and not sticky") || !strings.Contains(err.Error(), open) {
		t.Fatalf("CheckRoot of a link into a world-writable directory: %v, want a refusal naming %s", err, open)
	}
}
