package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"syscall"

	"github.com/pkg/sftp"
)

// A full disk at the target is the place's fault, not the file's: a
// transfer that finds no room there fails with ErrNoSpace (a
// *NoSpaceError), which the CLS treats as a site's transient fault (the
// target left alone a while, with backoff; its jobs wait). SFTP v3 says
// only "Failure" (SSH_FX_FAILURE) for a write to a full disk, so after a
// failure SFTP asks the server how much room is left
// (statvfs@openssh.com, on the same connection) before it removes its
// temporary file; a local place has ENOSPC and EDQUOT. Before a file of
// LargeBytes or more is sent, the Mover asks the target for its room
// (Free) and does not start one that cannot fit.

// ErrNoSpace is wrapped by every refusal of a place for want of room.
var ErrNoSpace = errors.New("no space left")

// lowSpace is how little room, after a write failed, means the disk was
// full: more than the writes in flight on one file (64 of 32 KiB) could
// have taken.
const lowSpace = 4 << 20

// NoSpaceError says where room was missing: Dir's filesystem, with Free
// bytes available (-1: not known) and Need the file's size (-1: not
// known), and the error that showed it.
type NoSpaceError struct {
	Dir        string
	Free, Need int64
	Err        error
}

func (e *NoSpaceError) Error() string {
	s := "no space left in " + e.Dir
	if e.Free >= 0 {
		s += fmt.Sprintf(" (%d bytes free", e.Free)
		if e.Need >= 0 {
			s += fmt.Sprintf(", %d needed", e.Need)
		}
		s += ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *NoSpaceError) Is(target error) bool { return target == ErrNoSpace }
func (e *NoSpaceError) Unwrap() error        { return e.Err }

// spacer is a place that can tell the room left for a file at p: bytes
// available to the user where p is (or would be made); ok false when it
// cannot tell.
type spacer interface {
	Free(ctx context.Context, p string) (n int64, ok bool)
}

// checkRoom refuses a transfer of size bytes to a place that says it has
// less room.
func checkRoom(ctx context.Context, to Place, p string, size int64) error {
	sp, ok := to.(spacer)
	if !ok || size < LargeBytes {
		return nil
	}
	free, ok := sp.Free(ctx, p)
	if !ok || free >= size {
		return nil
	}
	return &NoSpaceError{Dir: p, Free: free, Need: size}
}

// Free is the room on the filesystem of p's directory below the data
// root (or the nearest that exists: the root, the login directory).
func (s SFTP) Free(ctx context.Context, p string) (int64, bool) {
	full, err := Rooted(s.Root, p)
	if err != nil {
		return 0, false
	}
	for _, dir := range []string{path.Dir(full), s.Root, "."} {
		if dir == "" {
			continue
		}
		if st, err := s.Client.StatVFS(dir); err == nil {
			return int64(st.Bavail * st.Frsize), true
		}
	}
	return 0, false
}

// noSpace turns err, a failure to make or write a file in dir over SFTP,
// into a *NoSpaceError when the server's filesystem there is full (or
// the server says so, in SFTP v5's codes).
func (s SFTP) noSpace(err error, dir string) error {
	var se *sftp.StatusError
	if err == nil || errors.Is(err, ErrNoSpace) || !errors.As(err, &se) {
		return err
	}
	const (
		fxFailure      = 4
		fxNoSpace      = 14 // SSH_FX_NO_SPACE_ON_FILESYSTEM (v5)
		fxQuotaExceded = 15 // SSH_FX_QUOTA_EXCEEDED (v5)
	)
	switch se.Code {
	case fxNoSpace, fxQuotaExceded:
		return &NoSpaceError{Dir: dir, Free: -1, Need: -1, Err: err}
	case fxFailure:
		st, verr := s.Client.StatVFS(dir)
		if verr != nil {
			return err
		}
		free := int64(st.Bavail * st.Frsize)
		if free < lowSpace || st.Files > 0 && st.Favail == 0 {
			return &NoSpaceError{Dir: dir, Free: free, Need: -1, Err: err}
		}
	}
	return err
}

// Free is the room on the filesystem of p's directory (or the nearest
// that exists above it, up to the root).
func (d Dir) Free(ctx context.Context, p string) (int64, bool) {
	full, err := Rooted(d.Root, p)
	if err != nil {
		return 0, false
	}
	for dir := path.Dir(full); ; dir = path.Dir(dir) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err == nil {
			return int64(st.Bavail) * st.Bsize, true
		} else if !errors.Is(err, fs.ErrNotExist) || dir == "/" {
			return 0, false
		}
	}
}

// dirNoSpace turns a local ENOSPC or EDQUOT into a *NoSpaceError.
func dirNoSpace(err error, dir string) error {
	if err == nil || errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return err
	}
	return &NoSpaceError{Dir: dir, Free: -1, Need: -1, Err: err}
}
