package pathguard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// OpenOutput creates or truncates a file named for our output (a job's -o
// or -e file), for appending (stdout
// and stderr in one file interleave instead of writing over each other).
//
// The file may be named in a directory other users can change: a
// sticky one everyone may write (/tmp), a group's, or another user's own
// (a /tmp/logs someone else made first, 0755 or 1777). There, a link or
// a file another user put at the path before the job ran would make the
// output overwrite whatever the link points to (our .bashrc) or hand the
// output to that user. So the directory is reached by a walk that
// follows no link (OpenDir: the links on the way were checked first),
// and in a directory others can change an existing entry must be ours
// (or root's), a regular file must have one name only, and a
// link is followed only in a sticky directory of ours or root's (where
// no one else can replace it). A missing file is made O_EXCL, so nothing
// slips in between the look and the open; these are Linux's
// fs.protected_symlinks, protected_regular and (more strictly)
// protected_hardlinks, which containers and some clusters run with off,
// and which do not cover another user's own directory at all.
func OpenOutput(p string) (*os.File, error) {
	const flags = unix.O_WRONLY | unix.O_APPEND | unix.O_CLOEXEC
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, err
	}
	dfd, dir, err := openStat(filepath.Dir(abs))
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	name := filepath.Base(abs)
	at := func(flag int, mode uint32) (*os.File, error) {
		fd, err := unix.Openat(dfd, name, flag, mode)
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), p), nil
	}
	where := OthersChange(dir)
	if where == "" {
		return at(flags|unix.O_CREAT|unix.O_TRUNC, 0o666) // ours alone: our links are followed
	}
	for try := 0; try < 4; try++ {
		f, err := at(flags|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o666)
		if !errors.Is(err, unix.EEXIST) {
			return f, err
		}
		// O_NONBLOCK: a FIFO with no reader fails at once rather than
		// holding the job's start.
		f, err = at(flags|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		switch {
		case errors.Is(err, unix.ENOENT):
			continue // removed meanwhile: make it
		case errors.Is(err, unix.ELOOP):
			return openLink(dfd, name, dir, where, func() (*os.File, error) { return at(flags|unix.O_TRUNC, 0) })
		case err != nil:
			return nil, err
		}
		if err := ownEntry(f, dir, where); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("%s keeps changing in %s", name, where)
}

// openLink opens through the link name in the directory dfd: only in a
// sticky directory of ours or root's, and only a link of ours or root's
// (ownedHere) with one name (where fs.protected_hardlinks is off anyone
// may link any link of ours there, as any file).
func openLink(dfd int, name string, dir unix.Stat_t, where string, open func() (*os.File, error)) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	switch {
	case !ownedHere(st.Uid, dir):
		return nil, fmt.Errorf("a link of uid %d in %s: not used, the output would overwrite what it points to", st.Uid, where)
	case dir.Mode&unix.S_ISVTX == 0 || !Trusted(dir.Uid):
		return nil, fmt.Errorf("a link in %s: not followed, another user could point it at any file of yours before the open", where)
	case st.Nlink > 1: // a link of ours (~/.bashrc -> dotfiles/bashrc) another user linked here
		return nil, fmt.Errorf("a link with %d names in %s: not followed, it could be another link of yours linked there", st.Nlink, where)
	}
	return open()
}

// ownEntry checks the existing entry f opened in a directory others can
// change, and empties it: it must be ours (ownedHere) unless only the
// group of a directory of ours or root's may write there (the group's
// to trust, as it reads what we write there anyway), and a regular file must
// have one name (where fs.protected_hardlinks is off anyone may link any
// file of ours there, our .bashrc as well). Checked on the descriptor, so
// a swap after the open changes nothing.
func ownEntry(f *os.File, dir unix.Stat_t, where string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	groupOnly := dir.Mode&0o002 == 0 && Trusted(dir.Uid)
	if !groupOnly && !ownedHere(st.Uid, dir) {
		return fmt.Errorf("a file of uid %d in %s: not used, that user would read the output", st.Uid, where)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	if st.Nlink > 1 {
		return fmt.Errorf("a file with %d names in %s: not used, it could be another file of yours linked there", st.Nlink, where)
	}
	return f.Truncate(0)
}

// ownedHere says whether an entry of uid in dir may be used: it is ours,
// or the directory's own owner's where that is root (a file root left in
// /tmp). Another user's, even in their own directory, may not: it would
// hand them the output, or a FIFO of theirs could hold the job's start.
func ownedHere(uid uint32, dir unix.Stat_t) bool {
	return int(uid) == os.Geteuid() || uid == dir.Uid && Trusted(dir.Uid)
}
