package clscmd

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCreateProfile: the hidden --cpuprofile and --memprofile files are
// never written through a symbolic link (another user's, planted in /tmp
// under the name a user gives), and are the user's alone.
func TestCreateProfile(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "cls.prof")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if f, err := createProfile(link); err == nil {
		f.Close()
		t.Fatal("a profile was opened through a symbolic link")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the link's target was written: %q", b)
	}
	path := filepath.Join(dir, "new.prof")
	f, err := createProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new profile: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
}

// TestCreateProfileHardLink: a profile name that is another name of a
// file of the user's (a hard link planted in /tmp, where
// fs.protected_hardlinks is off) is refused before a byte of that file
// is emptied: a symbolic link is not the only way to reach it.
func TestCreateProfileHardLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "cls.prof")
	if err := os.Link(victim, link); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if f, err := createProfile(link); err == nil {
		f.Close()
		t.Error("a profile was opened through a second name of another file")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the other name's file was emptied: %q", b)
	}
}
