package pathguard

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/otheruser"
)

// TestOpenOutputOtherUsersDir: -o into a directory another user made (a
// /tmp/logs of theirs, 0755 or 1777) writes through none of their links,
// at the name or on the way, into a file of ours, nor into a file of
// theirs, nor waits on their FIFO; a fresh name there is still made, as
// our own file.
func TestOpenOutputOtherUsersDir(t *testing.T) {
	_, uid, gid := otheruser.Need(t)
	base := otheruser.SharedDir(t, "mq-stdio-")
	mine := t.TempDir()
	victim := filepath.Join(mine, "x.out")
	as := func(p string) {
		if err := os.Lchown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []os.FileMode{0o755, 0o777 | os.ModeSticky} {
		theirs := filepath.Join(base, "logs-"+strings.ReplaceAll(mode.String(), "-", "_"))
		if err := os.Mkdir(theirs, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(theirs, mode)
		as(theirs)
		link, sub, fifo := filepath.Join(theirs, "x.out"), filepath.Join(theirs, "sub"), filepath.Join(theirs, "fifo.out")
		file := filepath.Join(theirs, "file.out")
		for _, err := range []error{os.Symlink(victim, link), os.Symlink(mine, sub), syscall.Mkfifo(fifo, 0o666), os.WriteFile(file, nil, 0o644)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		as(link)
		as(sub)
		as(fifo)
		as(file)
		for _, p := range []string{link, filepath.Join(sub, "x.out"), fifo, file} {
			os.WriteFile(victim, []byte("precious\n"), 0o600)
			done := make(chan error, 1)
			go func() {
				f, err := OpenOutput(p)
				if err == nil {
					f.WriteString("job output\n")
					f.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Errorf("%v: -o %s: opened, want refused", mode, p)
				}
			case <-time.After(time.Minute):
				t.Fatalf("%v: -o %s: still opening after a minute", mode, p)
			}
			if b, _ := os.ReadFile(file); len(b) != 0 {
				t.Errorf("%v: -o %s: their file holds %q", mode, p, b)
			}
			if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
				t.Errorf("%v: -o %s wrote through another user's link: our file holds %q", mode, p, b)
			}
		}
		fresh := filepath.Join(theirs, "fresh.out")
		f, err := OpenOutput(fresh)
		if err != nil {
			t.Fatalf("%v: a fresh name: %v", mode, err)
		}
		f.Close()
		if fi, err := os.Lstat(fresh); err != nil || !fi.Mode().IsRegular() || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
			t.Errorf("%v: fresh.out: %v, %v; want our regular file", mode, fi, err)
		}
	}
	// A group's directory (ours, the group may write): a member's file
	// there is the group's to share, and written.
	group := filepath.Join(t.TempDir(), "group")
	os.Mkdir(group, 0o770)
	os.Chmod(group, 0o770)
	member := filepath.Join(group, "shared.out")
	os.WriteFile(member, []byte("old\n"), 0o666)
	as(member)
	f, err := OpenOutput(member)
	if err != nil {
		t.Fatalf("a group member's file in the group's directory: %v", err)
	}
	f.WriteString("job output\n")
	f.Close()
	if b, _ := os.ReadFile(member); string(b) != "job output\n" {
		t.Errorf("the member's file holds %q", b)
	}
}

// TestOpenOutputGroupDir: in a directory its group can write, a member
// could replace a link of ours at the name between the look and the
// open, so none is followed; a file of ours there is emptied and
// written, and in a directory of ours alone our link is followed.
func TestOpenOutputGroupDir(t *testing.T) {
	group, private := filepath.Join(t.TempDir(), "group"), t.TempDir()
	if err := os.Mkdir(group, 0o770); err != nil {
		t.Fatal(err)
	}
	os.Chmod(group, 0o770)
	target := filepath.Join(t.TempDir(), "target")
	os.WriteFile(target, []byte("precious\n"), 0o600)
	link := filepath.Join(group, "link.out")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	refusesOutput(t, link, "its group can write", target) // our link in a group's directory
	file, ours := filepath.Join(group, "file.out"), filepath.Join(private, "ours.out")
	os.WriteFile(file, []byte("old attempt\n"), 0o600)
	if err := os.Symlink(target, ours); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, ours} {
		f, err := OpenOutput(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		f.WriteString("this attempt\n")
		f.Close()
		if b, _ := os.ReadFile(p); string(b) != "this attempt\n" {
			t.Errorf("%s holds %q", p, b)
		}
	}
}

// TestOpenOutputSharedDir: in a sticky directory everyone may write, a
// -o file of ours is truncated and a new one made, but a file with
// another name (a hard link another user may make of any file of ours
// where fs.protected_hardlinks is off) is refused and left whole.
// (Another user's links and files: TestStdioPlantedByOtherUser, e2e.)
func TestOpenOutputSharedDir(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(t.TempDir(), "precious")
	os.WriteFile(precious, []byte("precious\n"), 0o600)
	linked := filepath.Join(shared, "linked.out")
	if err := os.Link(precious, linked); err != nil {
		t.Skipf("cannot make a hard link: %v", err)
	}
	refusesOutput(t, linked, "a file with 2 names", precious) // a hard link of another file of ours
	// A link of ours elsewhere (~/.bashrc -> dotfiles/bashrc), hard
	// linked into the shared directory: at the name, and on the way.
	mineDir := t.TempDir()
	for name, to := range map[string]string{"dotfile": precious, "dotdir": filepath.Dir(precious)} {
		if err := os.Symlink(to, filepath.Join(mineDir, name)); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(mineDir, name), filepath.Join(shared, name)); err != nil {
			t.Skipf("cannot make a hard link of a link: %v", err)
		}
	}
	refusesOutput(t, filepath.Join(shared, "dotfile"), "a link with 2 names", precious)
	refusesOutput(t, filepath.Join(shared, "dotdir", "precious"), "dotdir is a link with 2 names", precious)
	mine := filepath.Join(shared, "mine.out")
	os.WriteFile(mine, []byte("old attempt\n"), 0o600)
	for _, p := range []string{mine, filepath.Join(shared, "new.out")} {
		f, err := OpenOutput(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		f.WriteString("this attempt\n")
		f.Close()
		if b, _ := os.ReadFile(p); string(b) != "this attempt\n" {
			t.Errorf("%s holds %q", p, b)
		}
	}
}

// refusesOutput checks that OpenOutput(p) is refused saying want, and
// that precious still holds "precious\n".
func refusesOutput(t *testing.T, p, want, precious string) {
	t.Helper()
	if f, err := OpenOutput(p); err == nil || !strings.Contains(err.Error(), want) {
		if f != nil {
			f.Close()
		}
		t.Errorf("OpenOutput(%s): %v, want refused saying %q", p, err, want)
	}
	if b, _ := os.ReadFile(precious); string(b) != "precious\n" {
		t.Errorf("%s holds %q after OpenOutput(%s)", precious, b, p)
	}
}
