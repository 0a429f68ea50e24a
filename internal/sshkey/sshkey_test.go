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
