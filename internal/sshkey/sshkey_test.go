package sshkey

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewKeyPairExisting: a key pair is never made over an existing
// private key, and the refusal says so and what to do (it was open's
// "file exists"), still matching fs.ErrExist (the CLS's host key relies
// on it); the existing key is left as it was.
func TestNewKeyPairExisting(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ph_key")
	if _, err := NewKeyPair(path, "first"); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewKeyPair(path, "second")
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "private key "+path+" already exists") || !strings.Contains(err.Error(), "choose another name") {
		t.Errorf("NewKeyPair over an existing key: %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("the existing private key was changed")
	}
}

// TestNewKeyPairPubHardLink: KEY.pub that is another name of a file of
// the user's (a hard link planted in /tmp, where fs.protected_hardlinks
// is off) is not emptied and overwritten with the public key: the pair
// is refused, the private key removed, the file left whole.
func TestNewKeyPairPubHardLink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ph_key")
	if err := os.Link(victim, path+".pub"); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if _, err := NewKeyPair(path, "k"); err == nil || !strings.Contains(err.Error(), "names") {
		t.Errorf("NewKeyPair with KEY.pub a second name of another file: %v, want a refusal saying so", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the other file was overwritten: %q", b)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the private key was left: %v", err)
	}
}

// A file that cannot be opened is named whole, whatever part of its path
// is missing, and its error still says not found.
func TestOpenTrustedMissing(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{
		filepath.Join(dir, "known_hosts"),
		filepath.Join(dir, "home", ".ssh", "known_hosts"), // a home without ~/.ssh
	} {
		_, err := OpenTrusted(path, KnownHosts)
		if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "known hosts file "+path+": ") || strings.Count(err.Error(), path) != 1 {
			t.Errorf("OpenTrusted(%s): %v", path, err)
		}
	}
}
