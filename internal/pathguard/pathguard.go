// Package pathguard opens directories that files mq writes for the user
// are named in (a job's -o file, an output staged to the CLS host) where
// other users of the machine may have been first: it follows no link
// another user could have aimed, and reaches the directory by a walk
// that a link swapped in meanwhile cannot divert.
package pathguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// OthersChange says how the directory st is open to other users, who may
// then add entries to it (and, unless it is sticky and Trusted's, replace
// them): "" when it is not.
func OthersChange(st unix.Stat_t) string {
	switch {
	case st.Mode&0o002 != 0:
		return "a directory every user can write"
	case st.Mode&0o020 != 0:
		return "a directory its group can write"
	case !Trusted(st.Uid):
		return fmt.Sprintf("a directory of uid %d", st.Uid)
	}
	return ""
}

// Trusted says whether a file of uid is as good as ours: ours or root's.
func Trusted(uid uint32) bool { return uid == 0 || int(uid) == os.Geteuid() }

// Resolve resolves the links on the absolute path p as the kernel would,
// refusing one another user made in a directory others can change (a
// sticky /tmp, their own /tmp/logs): with /tmp/logs/x.out and /tmp/logs
// their link, what is written would go to a directory they chose, and
// over a file of ours there of that name. A link of root's, or of anyone
// in a directory only root or we can change (an administrator's
// /project/NAME), is followed. The components from the first missing one
// on are kept as they are.
func Resolve(p string) (string, error) {
	real, rest := "/", strings.Split(p, "/")
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			real = filepath.Dir(real)
			continue
		}
		next := filepath.Join(real, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(append([]string{next}, rest...)...), nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			real = next
			continue
		}
		if links++; links > 40 {
			return "", &fs.PathError{Op: "open", Path: p, Err: syscall.ELOOP}
		}
		if err := linkOK(next, fi, real); err != nil {
			return "", err
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			real = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return real, nil
}

// linkOK checks the link at link (fi) in the directory parent.
func linkOK(link string, fi fs.FileInfo, parent string) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || Trusted(st.Uid) {
		return nil
	}
	var dir unix.Stat_t
	if err := unix.Stat(parent, &dir); err != nil {
		return err
	}
	if where := OthersChange(dir); where != "" {
		return fmt.Errorf("%s is a link of uid %d in %s: not followed, what is written there would go where that user chose", link, st.Uid, where)
	}
	return nil
}

// OpenDir opens the directory dir (absolute) as an O_PATH descriptor,
// for the *at calls: its links are resolved and checked first (Resolve),
// and the real path is then walked a component at a time with
// O_NOFOLLOW, so a directory on the way swapped for a link meanwhile
// fails the walk instead of leading it elsewhere.
func OpenDir(dir string) (int, error) {
	real, err := Resolve(dir)
	if err != nil {
		return -1, err
	}
	const flag = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open("/", flag, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(real, "/") {
		if c == "" {
			continue
		}
		next, err := unix.Openat(fd, c, flag, 0)
		unix.Close(fd)
		if errors.Is(err, unix.ELOOP) {
			return -1, fmt.Errorf("%s: a directory on the way became a link", dir)
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		fd = next
	}
	return fd, nil
}

// OpenRoot opens the directory dir (absolute) as an os.Root, the
// directory OpenDir reaches: names in it then resolve from it, whatever
// is renamed or linked on dir's path later.
func OpenRoot(dir string) (*os.Root, error) {
	fd, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var want unix.Stat_t
	if err := unix.Fstat(fd, &want); err != nil {
		return nil, err
	}
	// os.Root opens by name: it must have opened the directory the walk
	// reached, not one a link swapped in has led it to since.
	real, err := Resolve(dir)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, err
	}
	fi, err := r.Stat(".")
	if err != nil {
		r.Close()
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Dev != want.Dev || st.Ino != want.Ino {
		r.Close()
		return nil, fmt.Errorf("%s changed while it was opened", dir)
	}
	return r, nil
}
