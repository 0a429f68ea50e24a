// Package sshkey reads and makes the SSH keys of mq: the CLS's host key,
// user and placeholder keys, and host key pins.
package sshkey

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/mqhome"
)

// NewKeyPair creates an ed25519 key pair: the private key at path (mode
// 0600, created exclusively: an existing key is never overwritten) and the
// public key at path+".pub". It returns the public key.
func NewKeyPair(path, comment string) (ssh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("private key %s already exists, and a key is never overwritten: choose another name, or remove it first (%w)", path, fs.ErrExist)
	}
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	if err := pem.Encode(f, block); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("private key: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("private key: %w", err)
	}
	spk, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(spk))) + " " + comment + "\n"
	// Never through a link, symbolic or hard, nor into another user's
	// file: in /tmp another user may have put one at path.pub to make us
	// overwrite a file of ours.
	pf, err := mqhome.CreateFile(path+".pub", 0o644)
	if err == nil {
		_, err = pf.WriteString(line)
		if cerr := pf.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.Remove(path) // no half pair: the same command may be run again
		if fi, lerr := os.Lstat(path + ".pub"); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("public key: %s.pub is a symbolic link: not written through it (someone else may have put it there); choose another name", path)
		}
		return nil, fmt.Errorf("public key: %w", err)
	}
	return spk, nil
}

// LoadSigner reads an unencrypted OpenSSH private key. Like OpenSSH it
// refuses a key that others can read.
func LoadSigner(path string) (ssh.Signer, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("private key %s is readable by others (mode %04o); chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(data)
	if err != nil {
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Errorf("private key %s is encrypted; placeholders need a key without a passphrase", path)
		}
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	return signer, nil
}

// ErrHostKeyMismatch is returned when the server's host key is not the
// pinned one: a placeholder must never talk to an impostor, so it stops.
var ErrHostKeyMismatch = errors.New("the CLS's host key does not match the pinned key")

// Pin returns a host key check that accepts only one key. spec is the
// key's SHA256 fingerprint as `cls key host` prints it ("SHA256:..."),
// or a file holding the public key (a .pub file, an authorized_keys line or
// a known_hosts line).
func Pin(spec string) (ssh.HostKeyCallback, error) {
	if spec == "" {
		return nil, errors.New("no host key to pin: give the CLS's fingerprint (SHA256:...) or public key file")
	}
	want := spec
	if !strings.HasPrefix(spec, "SHA256:") {
		data, err := os.ReadFile(spec)
		if err != nil {
			return nil, fmt.Errorf("host key: %w", err)
		}
		pk, err := parseAnyPublicKey(data)
		if err != nil {
			return nil, fmt.Errorf("host key file %s: %w", spec, err)
		}
		want = ssh.FingerprintSHA256(pk)
	}
	return func(hostname string, _ net.Addr, key ssh.PublicKey) error {
		if got := ssh.FingerprintSHA256(key); got != want {
			return fmt.Errorf("%w: %s offered %s, pinned %s", ErrHostKeyMismatch, hostname, got, want)
		}
		return nil
	}, nil
}

// parseAnyPublicKey reads the first key of a .pub, authorized_keys or
// known_hosts file.
func parseAnyPublicKey(data []byte) (ssh.PublicKey, error) {
	if pk, _, _, _, err := ssh.ParseAuthorizedKey(data); err == nil {
		return pk, nil
	}
	_, _, pk, _, _, err := ssh.ParseKnownHosts(data)
	if err != nil {
		return nil, errors.New("no public key found (want a .pub, authorized_keys or known_hosts line)")
	}
	return pk, nil
}
