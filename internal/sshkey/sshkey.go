// Package sshkey reads and makes the SSH keys of mq: the CLS's host key,
// user and placeholder keys, and host key pins.
package sshkey

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/internal/pathguard"
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
// refuses a key that others can read; it also refuses one that is not
// the user's own, whose owner could change it, or which may not be the
// user's at all. The file is opened once (OpenTrusted): what is checked
// is what is read.
func LoadSigner(path string) (ssh.Signer, error) { return loadSigner(path, os.Geteuid()) }

func loadSigner(path string, euid int) (ssh.Signer, error) {
	data, err := readTrusted(path, privateKey, euid)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(data)
	if err != nil {
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Errorf("private key %s is encrypted (mq cannot ask for its passphrase)", path)
		}
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	return signer, nil
}

// A Trust says what a file mq reads a key from must be, and names it in
// errors.
type Trust struct {
	What string // "private key", "host key file", ...
	// Private: owned by the user and neither readable nor writable by
	// group or others (a private key). Otherwise owned by the user or
	// root and not writable by group or others (a key to trust).
	Private bool
	Hint    string // the way out besides fixing the file, for errors
	// Risk is what another user who could change the file could do, for
	// errors; "" means putting their own key in it.
	Risk string
}

var (
	privateKey = Trust{What: "private key", Private: true}
	pinFile    = Trust{What: "host key file", Hint: "or pin the key's fingerprint (SHA256:...) instead"}
	// KnownHosts is the rule for a known_hosts file.
	KnownHosts = Trust{What: "known hosts file"}
)

// maxKeyFile bounds what is read of a key file: an RSA private key of
// 16384 bits takes about 12 KiB.
const maxKeyFile = 1 << 20

// OpenTrusted opens path to read a key from (pathguard.OpenRead: a
// regular file, reached through no link another user could aim) and
// checks the opened file's owner and mode as t says: another user who
// could write it, or replace it, could make mq use or trust a key of
// theirs. Each refusal is one line naming the file and the fix.
func OpenTrusted(path string, t Trust) (*os.File, error) { return openTrusted(path, t, os.Geteuid()) }

func openTrusted(path string, t Trust, euid int) (*os.File, error) {
	f, err := pathguard.OpenRead(path)
	if err != nil {
		// Named by its whole path: the error may name only the first
		// part that is missing (a home without ~/.ssh).
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == path {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s %s: %w", t.What, path, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = t.check(path, fi, euid)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Check checks fi, the stat of a file opened to read a key from, as
// OpenTrusted does.
func (t Trust) Check(path string, fi fs.FileInfo) error { return t.check(path, fi, os.Geteuid()) }

func (t Trust) check(path string, fi fs.FileInfo, euid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s %s: cannot tell its owner", t.What, path)
	}
	uid, perm := int(st.Uid), fi.Mode().Perm()
	hint := ""
	if t.Hint != "" {
		hint = ", " + t.Hint
	}
	risk := t.Risk
	if risk == "" {
		risk = "put their own key in it"
	}
	switch {
	case t.Private && uid != euid:
		return fmt.Errorf("%s %s is owned by uid %d, not by you (uid %d): its owner can read and change it; if it is yours, sudo chown %d %s; else use a key of your own", t.What, path, uid, euid, euid, path)
	case !t.Private && uid != euid && uid != 0:
		return fmt.Errorf("%s %s is owned by uid %d, not by you (uid %d) or root: they could %s; copy it to a file of your own%s", t.What, path, uid, euid, risk, hint)
	case t.Private && perm&0o077 != 0:
		how := "open to"
		switch {
		case perm&0o044 != 0:
			how = "readable by"
		case perm&0o022 != 0:
			how = "writable by"
		}
		return fmt.Errorf("%s %s is %s others (mode %04o); chmod 600 %s", t.What, path, how, perm, path)
	case perm&0o022 != 0:
		return fmt.Errorf("%s %s is writable by others (mode %04o): they could %s; chmod go-w %s%s", t.What, path, perm, risk, path, hint)
	}
	return nil
}

// readTrusted reads the key file path, opened and checked as OpenTrusted
// does.
func readTrusted(path string, t Trust, euid int) ([]byte, error) {
	f, err := openTrusted(path, t, euid)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", t.What, path, err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("%s %s is over %d bytes: not a key file", t.What, path, maxKeyFile)
	}
	return data, nil
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
		data, err := readTrusted(spec, pinFile, os.Geteuid())
		if err != nil {
			return nil, err
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
