package sshserver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/filelock"
	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/protocol"
)

func owner(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return 0
}

// KeyFileName is the file in $MQ_HOME that lists the keys the CLS accepts.
// It uses OpenSSH's authorized_keys syntax with one option, role="admin",
// role="user" or role="placeholder", so it can be read and edited like
// any key file:
//
//	role="placeholder" ssh-ed25519 AAAAC3Nza... cluster-a
const KeyFileName = "authorized_keys"

// Key is one accepted public key.
type Key struct {
	Role        string // protocol.RoleAdmin, RoleUser or RolePlaceholder
	Key         ssh.PublicKey
	Comment     string
	Fingerprint string // SHA256:...
}

// Line is the key's line in the key file.
func (k Key) Line() string {
	line := fmt.Sprintf("role=%q %s", k.Role, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k.Key))))
	if k.Comment != "" {
		line += " " + k.Comment
	}
	return line
}

// KeyFile is the key file of a CLS. Lookups re-read the file when it has
// changed, so `cls key add` and `cls key remove` take effect for the next
// connection without restarting the CLS. Connections already open keep the
// role they authenticated with, as with sshd.
type KeyFile struct {
	Path string

	mu   sync.Mutex
	fi   os.FileInfo
	keys map[string]Key // by fingerprint
	err  error
}

// NewKeyFile returns the key file at path (it need not exist yet).
func NewKeyFile(path string) *KeyFile { return &KeyFile{Path: path} }

// ValidRole reports whether role may be given to a key.
func ValidRole(role string) bool {
	return role == protocol.RoleAdmin || role == protocol.RoleUser || role == protocol.RolePlaceholder
}

// roleError says which roles there are.
func roleError(role string) error {
	return fmt.Errorf("role must be %q, %q or %q, not %q", protocol.RoleAdmin, protocol.RoleUser, protocol.RolePlaceholder, role)
}

// Lookup returns the entry of an accepted key.
func (f *KeyFile) Lookup(pk ssh.PublicKey) (Key, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refresh(); err != nil {
		return Key{}, false, err
	}
	k, ok := f.keys[ssh.FingerprintSHA256(pk)]
	if ok && !bytes.Equal(k.Key.Marshal(), pk.Marshal()) {
		ok = false // a fingerprint collision is not a match
	}
	return k, ok, nil
}

// refresh re-reads the file if it changed since the last read. Every
// lookup checks the directory and the file again as sshd's StrictModes
// does (mqhome): a key file, or a directory, that someone else could
// have written refuses every key until it is fixed.
func (f *KeyFile) refresh() error {
	if _, _, err := mqhome.Check(filepath.Dir(f.Path)); err != nil {
		f.fi = nil
		return fmt.Errorf("key file: %w", err)
	}
	fi, err := os.Lstat(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		f.fi, f.keys, f.err = nil, map[string]Key{}, nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	if f.fi != nil && os.SameFile(f.fi, fi) && fi.ModTime().Equal(f.fi.ModTime()) && fi.Size() == f.fi.Size() &&
		fi.Mode() == f.fi.Mode() && owner(fi) == owner(f.fi) {
		return f.err
	}
	keys, err := readKeys(f.Path)
	f.fi, f.err = fi, err
	if err == nil {
		f.keys = map[string]Key{}
		for _, k := range keys {
			f.keys[k.Fingerprint] = k
		}
	}
	return err
}

// List returns the accepted keys in file order.
func (f *KeyFile) List() ([]Key, error) {
	keys, err := readKeys(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return keys, err
}

// readKeys parses a key file. A line it cannot parse is an error naming
// the line: a key file that silently drops entries would lock people out
// without saying why.
func readKeys(path string) ([]Key, error) {
	data, err := mqhome.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []Key
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, err := ParseKeyLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

// ParseKeyLine parses one line of the key file.
func ParseKeyLine(line string) (Key, error) {
	pk, comment, opts, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return Key{}, fmt.Errorf("not a public key line: %w", err)
	}
	k := Key{Key: pk, Comment: comment, Fingerprint: ssh.FingerprintSHA256(pk)}
	for _, o := range opts {
		name, val, _ := strings.Cut(o, "=")
		if name != "role" {
			return Key{}, fmt.Errorf("unknown option %q (only role= is understood)", name)
		}
		k.Role = strings.Trim(val, `"`)
	}
	if !ValidRole(k.Role) {
		return Key{}, roleError(k.Role)
	}
	return k, nil
}

// ParsePublicKey reads a public key in authorized_keys form (as in a .pub
// file): "ssh-ed25519 AAAA... comment".
func ParsePublicKey(data []byte) (ssh.PublicKey, string, error) {
	pk, comment, opts, _, err := ssh.ParseAuthorizedKey(data)
	if err != nil {
		return nil, "", fmt.Errorf("not an OpenSSH public key: %w", err)
	}
	if len(opts) > 0 {
		return nil, "", fmt.Errorf("public key has options %q; give a plain .pub file", opts)
	}
	return pk, comment, nil
}

// Add adds a key with a role. A key already present is an error (remove
// it first to change its role).
func (f *KeyFile) Add(role string, pk ssh.PublicKey, comment string) (Key, error) {
	if !ValidRole(role) {
		return Key{}, roleError(role)
	}
	comment = strings.Join(strings.Fields(comment), "_") // one field, no line breaks
	k := Key{Role: role, Key: pk, Comment: comment, Fingerprint: ssh.FingerprintSHA256(pk)}
	err := f.edit(func(keys []Key) ([]Key, error) {
		for _, old := range keys {
			if old.Fingerprint == k.Fingerprint {
				return nil, fmt.Errorf("key %s is already added (role %s); remove it first to change it", k.Fingerprint, old.Role)
			}
		}
		return append(keys, k), nil
	})
	return k, err
}

// Remove removes the keys whose fingerprint or comment is sel and returns
// them; none matching is an error.
func (f *KeyFile) Remove(sel string) ([]Key, error) {
	var removed []Key
	err := f.edit(func(keys []Key) ([]Key, error) {
		var keep []Key
		for _, k := range keys {
			if k.Fingerprint == sel || (k.Comment != "" && k.Comment == sel) {
				removed = append(removed, k)
			} else {
				keep = append(keep, k)
			}
		}
		if len(removed) == 0 {
			return nil, fmt.Errorf("no key with fingerprint or name %q", sel)
		}
		return keep, nil
	})
	return removed, err
}

// edit rewrites the key file under an exclusive lock, atomically (write a
// temporary file, then rename), so a crash never leaves half a file and
// concurrent edits do not lose each other's keys.
func (f *KeyFile) edit(change func([]Key) ([]Key, error)) error {
	lock, err := mqhome.OpenFile(f.Path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	defer filelock.Close(lock)
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	keys, err := readKeys(f.Path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	keys, err = change(keys)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# Keys the mq CLS accepts over SSH (see `cls key --help`).\n")
	for _, k := range keys {
		b.WriteString(k.Line())
		b.WriteByte('\n')
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), ".authorized_keys.*")
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return fmt.Errorf("key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	return nil
}
