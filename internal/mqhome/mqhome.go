// Package mqhome holds the rules that keep $MQ_HOME the CLS owner's own.
//
// Whoever can write MQ_HOME can become the CLS's user: an authorized_keys
// there names who may run commands, the socket is what mqsub trusts, and
// a symbolic link planted at cls.log or mq.db makes the CLS write where it
// points. So, as sshd's StrictModes does for ~/.ssh:
//
//   - MQ_HOME must be a directory owned by this process's user and not
//     writable by group or others. Readable by others is allowed with a
//     warning (they could read every command and output).
//   - Every directory above it must be owned by root or this user, and not
//     writable by group or others unless it is sticky (as /tmp is): in a
//     sticky directory no one else may rename or remove our entry.
//   - Files and directories in it are opened without following a symbolic
//     link, and must be owned by this user and not writable by others.
//
// Once MQ_HOME passes, no one else can create or replace anything in it,
// so the per-file checks are a second line, not a race to win.
package mqhome

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Check reports whether dir may hold a CLS's state for this process's
// user, and returns its real path (symbolic links resolved), which is
// what the caller should use from then on: a link whoever owns it could
// point elsewhere after the check. A mode that is safe but lets others
// read is returned as warning.
func Check(dir string) (real, warning string, err error) {
	if err := checkLinks("MQ_HOME", dir); err != nil {
		return "", "", err
	}
	real, err = filepath.EvalSymlinks(dir)
	if err != nil {
		return "", "", fmt.Errorf("MQ_HOME: %w", err)
	}
	warning, err = check(dir, real)
	if err != nil {
		return "", "", err
	}
	return real, warning, nil
}

func check(dir, real string) (warning string, err error) {
	fi, err := os.Lstat(real)
	if err != nil {
		return "", fmt.Errorf("MQ_HOME: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("MQ_HOME %s is not a directory", dir)
	}
	uid := owner(fi)
	mode := fi.Mode()
	if uid != os.Geteuid() {
		return "", fmt.Errorf("MQ_HOME %s (mode %04o) is owned by uid %d, not by you (uid %d): another user could act as your CLS; use a directory of your own (mode 0700)", dir, perm(mode), uid, os.Geteuid())
	}
	if mode.Perm()&0o022 != 0 {
		return "", fmt.Errorf("MQ_HOME %s is writable by others (mode %04o): they could act as your CLS; chmod 700 %s", dir, perm(mode), dir)
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		if err := checkAncestor(dir, d); err != nil {
			return "", err
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if mode.Perm()&0o077 != 0 {
		warning = fmt.Sprintf("MQ_HOME %s is mode %04o: other users can read the jobs and their output; chmod 700 %s", dir, perm(mode), dir)
	}
	return warning, nil
}

// checkLinks refuses a symbolic link on dir's path owned by someone
// other than the user or root: the real path passes the checks, but the
// link's owner could point it at another directory of the user's (or,
// in /tmp, make it before the user's first use) between two commands.
func checkLinks(what, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil // EvalSymlinks says what is wrong
	}
	for d := abs; d != filepath.Dir(d); d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if uid := owner(fi); uid != 0 && uid != os.Geteuid() {
			return fmt.Errorf("%s %s goes through %s, a link owned by uid %d (not you or root): they could point it elsewhere; use a path of your own", what, dir, d, uid)
		}
	}
	return nil
}

// checkAncestor checks a directory above MQ_HOME: only root or the user
// may rename MQ_HOME away and put another in its place.
func checkAncestor(home, d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return fmt.Errorf("MQ_HOME: %w", err)
	}
	uid := owner(fi)
	if uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("MQ_HOME %s is inside %s, owned by uid %d (not you or root): they could replace MQ_HOME; use a directory of your own", home, d, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("MQ_HOME %s is inside %s, writable by others and not sticky (mode %04o): they could replace MQ_HOME; use a directory of your own", home, d, perm(fi.Mode()))
	}
	return nil
}

// CheckEntry checks an existing entry of MQ_HOME without following it: it
// must be of type typ (0 for a regular file, fs.ModeDir, fs.ModeSocket),
// owned by this user and not writable by others. An absent entry is fine.
func CheckEntry(path string, typ fs.FileMode) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return checkInfo(path, fi, typ)
}

func checkInfo(path string, fi fs.FileInfo, typ fs.FileMode) error {
	switch got := fi.Mode().Type(); {
	case got == fs.ModeSymlink:
		return fmt.Errorf("%s is a symbolic link; refusing to follow it (remove it)", path)
	case got != typ:
		return fmt.Errorf("%s is a %s, not a %s; remove it", path, typeName(got), typeName(typ))
	}
	if uid := owner(fi); uid != os.Geteuid() {
		// Not "remove it": mq.db, its -wal and output/ are the user's jobs
		// when a copy or a run under sudo left them root's.
		return fmt.Errorf("%s is owned by uid %d, not by you (uid %d); if it is yours, sudo chown %d %s; if not, move it away", path, uid, os.Geteuid(), os.Geteuid(), path)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %04o); chmod go-w %s", path, perm(fi.Mode()), path)
	}
	return nil
}

// OpenFile opens a file of MQ_HOME like os.OpenFile, but never through a
// symbolic link, and only a regular file of this user's that others cannot
// write. O_TRUNC empties it only once it passed: a file refused is left
// whole.
func OpenFile(path string, flag int, mode fs.FileMode) (*os.File, error) {
	return open(path, flag, mode, nil)
}

// CreateFile creates or empties path for writing (mode perm when new), as
// os.Create does, with OpenFile's checks, and only a file of one name: a
// path the user names in a shared directory such as /tmp (a profile, a
// key) may be a hard link another user made there to a file of the
// user's (where fs.protected_hardlinks is off), which it would empty and
// overwrite.
func CreateFile(path string, perm fs.FileMode) (*os.File, error) {
	return open(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm, func(fi fs.FileInfo) error {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			return fmt.Errorf("%s has %d names (hard links): another name may be a file of yours elsewhere, which writing here would overwrite; choose another name", path, st.Nlink)
		}
		return nil
	})
}

// open is OpenFile with a further check of the opened file, before it is
// emptied.
func open(path string, flag int, mode fs.FileMode, also func(fs.FileInfo) error) (*os.File, error) {
	f, err := os.OpenFile(path, flag&^os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, mode)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link; refusing to follow it (remove it)", path)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkInfo(path, fi, 0)
	}
	if err == nil && also != nil {
		err = also(fi)
	}
	if err == nil && flag&os.O_TRUNC != 0 {
		err = f.Truncate(0)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads a file of MQ_HOME with OpenFile's checks.
func ReadFile(path string) ([]byte, error) {
	f, err := OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// MkdirAll makes dir (mode 0700) and any missing parents, and checks that
// dir is a directory of this user's that others cannot write, without
// following a symbolic link at dir itself.
func MkdirAll(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return CheckEntry(dir, fs.ModeDir)
}

func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// perm is the mode's permission bits with setuid, setgid and sticky, as
// chmod and ls show them.
func perm(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}

func typeName(t fs.FileMode) string {
	switch t {
	case 0:
		return "regular file"
	case fs.ModeDir:
		return "directory"
	case fs.ModeSocket:
		return "socket"
	case fs.ModeNamedPipe:
		return "named pipe"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "device"
	}
	return "special file"
}

// CheckPrivate checks a directory besides MQ_HOME that holds what jobs
// read or what they wrote (a placeholder's --data-root and --out) by
// MQ_HOME's rules: whoever else could write it, or rename it away, could
// swap a staged input for bytes of their choosing, or a job's output. It
// must be a directory owned by this user and not writable by group or
// others, and every directory above it owned by root or this user and not
// writable by others unless sticky. what names it in errors, each one line
// naming the fix. It returns the real path (links resolved).
func CheckPrivate(what, dir string) (string, error) {
	if err := checkLinks(what, dir); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s %s is not a directory", what, dir)
	}
	if uid := owner(fi); uid != os.Geteuid() {
		return "", fmt.Errorf("%s %s (mode %04o) is owned by uid %d, not by you (uid %d): they could replace its files; use a directory of your own (mkdir -m 700 DIR)", what, dir, perm(fi.Mode()), uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("%s %s is writable by others (mode %04o): they could replace its files; chmod 700 %s", what, dir, perm(fi.Mode()), dir)
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		if uid := owner(fi); uid != 0 && uid != os.Geteuid() {
			return "", fmt.Errorf("%s %s is inside %s, owned by uid %d (not you or root): they could replace it; use a directory of your own", what, dir, d, uid)
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return "", fmt.Errorf("%s %s is inside %s, writable by others and not sticky (mode %04o): they could replace it; use a directory of your own, or chmod go-w %s", what, dir, d, perm(fi.Mode()), d)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	return real, nil
}
