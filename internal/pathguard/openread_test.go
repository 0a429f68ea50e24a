package pathguard

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mq-hpc/mq/internal/otheruser"
)

// TestOpenRead: OpenRead follows our links to a regular file, the last
// name's included (relative, absolute, chained), and opens that file;
// a directory, a FIFO, a loop of links and a missing file are refused,
// and so is a link another user made in a directory others can change.
func TestOpenRead(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "keys/k"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{
		"rel": "keys/k", "abs": filepath.Join(root, "keys/k"), "chain": "rel", "dir": "keys",
		"loop1": "loop2", "loop2": "loop1", "tofifo": "fifo",
	} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"keys/k", "rel", "abs", "chain", "dir/k", "dir/../keys/k"} {
		f, err := OpenRead(root + "/" + p)
		if err != nil {
			t.Errorf("OpenRead(%s): %v", p, err)
			continue
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != "key" {
			t.Errorf("OpenRead(%s) read %q", p, b)
		}
	}
	t.Chdir(root)
	if f, err := OpenRead("chain"); err != nil {
		t.Errorf("OpenRead(chain) in %s: %v", root, err)
	} else {
		f.Close()
	}
	for p, want := range map[string]string{
		"keys": "not a regular file", "fifo": "not a regular file", "tofifo": "not a regular file",
		"loop1": "too many levels", "missing": "no such file", "keys/k/x": "not a directory",
	} {
		if f, err := OpenRead(filepath.Join(root, p)); err == nil {
			f.Close()
			t.Errorf("OpenRead(%s) opened it", p)
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("OpenRead(%s): %v; want %q", p, err, want)
		}
	}

	// A second name of a file of ours: read where only we can change the
	// directory, not where others can (they may have linked it there).
	if err := os.Link(filepath.Join(root, "keys/k"), filepath.Join(root, "keys/k2")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if f, err := OpenRead(filepath.Join(root, "keys/k2")); err != nil {
		t.Errorf("OpenRead of a file of 2 names in our own directory: %v", err)
	} else {
		f.Close()
	}
	group := filepath.Join(root, "group")
	if err := os.Mkdir(group, 0o770); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(group, 0o770); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "keys/k"), filepath.Join(group, "k")); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenRead(filepath.Join(group, "k")); err == nil {
		f.Close()
		t.Error("OpenRead read a file of several names in a directory its group can write")
	} else if !strings.Contains(err.Error(), "has 3 names in a directory its group can write") {
		t.Errorf("OpenRead of a file of 3 names in a group's directory: %v", err)
	}

	_, uid, gid := otheruser.Need(t)
	shared := otheruser.SharedDir(t, "mq-openread-")
	planted := filepath.Join(shared, "key")
	otheruser.Symlink(t, filepath.Join(root, "keys/k"), planted, uid, gid)
	if f, err := OpenRead(planted); err == nil {
		f.Close()
		t.Errorf("OpenRead followed another user's link in a sticky directory everyone can write")
	} else if !strings.Contains(err.Error(), "link of uid") {
		t.Errorf("OpenRead(another user's link): %v", err)
	}
}
