// Package pathguard opens directories that files mq writes for the user
// are named in (a job's -o file, an output staged to the CLS host, an
// export) where other users of the machine may have been first: it
// follows no link another user could have aimed, and reaches the
// directory by a walk of descriptors that nothing swapped in meanwhile
// can divert.
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

// Resolve resolves the links on the path p (relative to the working
// directory if not absolute) as the kernel would,
// refusing one another user made in a directory others can change (a
// sticky /tmp, their own /tmp/logs): with /tmp/logs/x.out and /tmp/logs
// their link, what is written would go to a directory they chose, and
// over a file of ours there of that name. A link of root's, or of anyone
// in a directory only root or we can change (an administrator's
// /project/NAME), is followed. The components from the first missing one
// on are kept as they are.
func Resolve(p string) (string, error) {
	fd, real, err := walk(p, true)
	if fd >= 0 {
		unix.Close(fd)
	}
	return real, err
}

// OpenDir opens the directory dir (relative to the working directory if
// not absolute) as an O_PATH descriptor for the *at calls, its links
// resolved and checked as Resolve does.
func OpenDir(dir string) (int, error) {
	fd, _, err := walk(dir, false)
	return fd, err
}

// openStat is OpenDir's descriptor of dir and its stat.
func openStat(dir string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := OpenDir(dir)
	if err != nil {
		return -1, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// walk resolves p a component at a time by descriptor: each entry is
// opened O_PATH|O_NOFOLLOW in the directory reached so far, and a link
// is checked (its owner, its directory's mode and owner) and read
// through that same descriptor, so nothing renamed or swapped meanwhile
// (by the owner of a directory on the way) can make it check one entry
// and follow another. It returns the descriptor of the directory p names
// and its real path; with missingOK, at a missing component, no
// descriptor (-1) and the real path so far with the rest of p after it.
func walk(p string, missingOK bool) (int, string, error) {
	const flag = unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd() // not filepath.Abs: it would clean ".." after a link away
		if err != nil {
			return -1, "", err
		}
		p = wd + "/" + p
	}
	root, err := unix.Open("/", flag|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", err
	}
	// fds[i] is the directory of the i first components of real.
	fds, real := []int{root}, "/"
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	rest := strings.Split(p, "/")
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(fds) > 1 {
				unix.Close(fds[len(fds)-1])
				fds, real = fds[:len(fds)-1], filepath.Dir(real)
			}
			continue
		}
		dir := fds[len(fds)-1]
		// O_DIRECTORY first: only a lookup for a directory triggers an
		// automount (an autofs /home/NAME), O_PATH's otherwise does not;
		// a link (or a file) fails it, and is then opened as itself.
		fd, err := unix.Openat(dir, c, flag|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOTDIR) {
			fd, err = unix.Openat(dir, c, flag, 0)
		}
		if errors.Is(err, unix.ENOENT) && missingOK {
			closeAll()
			return -1, filepath.Join(append([]string{real, c}, rest...)...), nil
		}
		if err != nil {
			closeAll()
			return -1, "", &fs.PathError{Op: "open", Path: filepath.Join(real, c), Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			closeAll()
			return -1, "", err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			fds, real = append(fds, fd), filepath.Join(real, c)
			continue
		case unix.S_IFLNK:
		default:
			unix.Close(fd)
			closeAll()
			return -1, "", &fs.PathError{Op: "open", Path: filepath.Join(real, c), Err: unix.ENOTDIR}
		}
		target, err := linkTarget(fd, dir, filepath.Join(real, c), st)
		unix.Close(fd)
		if err == nil && links >= 40 {
			err = &fs.PathError{Op: "open", Path: p, Err: syscall.ELOOP}
		}
		if err != nil {
			closeAll()
			return -1, "", err
		}
		links++
		if filepath.IsAbs(target) {
			for _, fd := range fds[1:] {
				unix.Close(fd)
			}
			fds, real = fds[:1], "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	for _, fd := range fds[:len(fds)-1] {
		unix.Close(fd)
	}
	return fds[len(fds)-1], real, nil
}

// linkTarget checks the link fd (O_PATH, its stat st, named name) in the
// directory dir and reads it: in a directory others can change, a link
// of another user than root, or one with several names, is refused.
func linkTarget(fd, dir int, name string, st unix.Stat_t) (string, error) {
	if !Trusted(st.Uid) || st.Nlink > 1 {
		var d unix.Stat_t
		if err := unix.Fstat(dir, &d); err != nil {
			return "", err
		}
		where := OthersChange(d)
		switch {
		case where != "" && !Trusted(st.Uid):
			return "", fmt.Errorf("%s is a link of uid %d in %s: not followed, what is written there would go where that user chose", name, st.Uid, where)
		case where != "": // where fs.protected_hardlinks is off, anyone may link a link of ours there
			return "", fmt.Errorf("%s is a link with %d names in %s: not followed, it could be another link of yours linked there", name, st.Nlink, where)
		}
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err == nil && n == len(buf) {
		err = unix.ENAMETOOLONG // cut short
	}
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	return string(buf[:n]), nil
}

// OpenRoot opens the directory dir (absolute) as an os.Root, the
// directory OpenDir reaches: names in it then resolve from it, whatever
// is renamed or linked on dir's path later.
func OpenRoot(dir string) (*os.Root, error) {
	fd, want, err := openStat(dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
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

// OpenRead opens the existing regular file p (relative to the working
// directory if not absolute) for reading, for a secret or a key mq is to
// trust: the links on its path, its last name's included, are resolved
// and checked as Resolve does (a user's own link, as ~/.ssh/id_ed25519 to
// a key kept elsewhere, is followed; another user's link in a directory
// others can change is not), and the file is opened O_NOFOLLOW in the
// directory the walk reached. The caller checks the returned file's
// owner and mode by its descriptor and reads from it, so what it checks
// is what it reads, whatever is renamed meanwhile. Anything but a regular
// file (a FIFO, a device) is refused before it is opened for reading,
// and so is a file of several names in a directory others can change.
func OpenRead(p string) (*os.File, error) {
	name := p
	for links := 0; ; links++ {
		if links > 40 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ELOOP}
		}
		dir, base := "/", p
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			if i > 0 {
				dir = p[:i]
			}
			base = p[i+1:]
		} else {
			dir = "."
		}
		dfd, real, err := walk(dir, false)
		if err != nil {
			return nil, err
		}
		f, target, err := openLast(dfd, real, base)
		unix.Close(dfd)
		switch {
		case err != nil:
			return nil, err
		case f != nil:
			return f, nil
		case filepath.IsAbs(target):
			p = target
		default:
			p = real + "/" + target
		}
	}
}

// openLast opens the regular file base in the directory dfd (whose real
// path is real), or, when base is a link it may follow, returns its
// target instead.
func openLast(dfd int, real, base string) (*os.File, string, error) {
	full := filepath.Join(real, base)
	lfd, err := unix.Openat(dfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", &fs.PathError{Op: "open", Path: full, Err: err}
	}
	defer unix.Close(lfd)
	var st unix.Stat_t
	if err := unix.Fstat(lfd, &st); err != nil {
		return nil, "", err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		target, err := linkTarget(lfd, dfd, full, st)
		return nil, target, err
	case unix.S_IFREG:
	default:
		return nil, "", fmt.Errorf("%s is not a regular file", full)
	}
	// The entry checked above may have been replaced since: the file is
	// opened without following a link, and checked again once open.
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", &fs.PathError{Op: "open", Path: full, Err: err}
	}
	if err := regularHere(fd, dfd, full); err != nil {
		unix.Close(fd)
		return nil, "", err
	}
	return os.NewFile(uintptr(fd), full), "", nil
}

// regularHere checks the file fd opened in the directory dfd: a regular
// file, and, in a directory others can change, one of a single name:
// where fs.protected_hardlinks is off anyone may link any file of ours
// there (another key of ours, say), which its owner check would pass.
func regularHere(fd, dfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s is not a regular file", name)
	}
	if st.Nlink > 1 {
		var d unix.Stat_t
		if err := unix.Fstat(dfd, &d); err != nil {
			return err
		}
		if where := OthersChange(d); where != "" {
			return fmt.Errorf("%s has %d names in %s: not read, another name may be another file of yours linked there; copy it to a file of its own", name, st.Nlink, where)
		}
	}
	return nil
}
