package stage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
// temporary file, and, where that shows room (a quota it does not show),
// whether a one-block probe file can be written there; a local place has
// ENOSPC and EDQUOT. Before a file of
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
		free := int64(-1)
		if st, verr := s.Client.StatVFS(dir); verr == nil {
			free = int64(st.Bavail * st.Frsize)
			if free < lowSpace || st.Files > 0 && st.Favail == 0 {
				return &NoSpaceError{Dir: dir, Free: free, Need: -1, Err: err}
			}
		}
		// Room on the filesystem (or a server that does not say): the
		// user's quota may be full, which statvfs does not show.
		if s.probeFull(dir) {
			return &NoSpaceError{Dir: dir, Free: -1, Need: -1, Err: fmt.Errorf("not even %d bytes can be written there (a quota full?): %w", probeBytes, err)}
		}
	}
	return err
}

// probeBytes is what probeFull writes: one block.
const probeBytes = 4096

// probeFull says whether a new file of probeBytes cannot be written in dir
// for the reason the failed write had (SSH_FX_FAILURE): no room, for
// the user at least. It runs while the failed transfer's temporary file
// is still there, holding what room it took. The probe is named as a
// temporary file of this writer, so a leftover is swept.
func (s SFTP) probeFull(dir string) bool {
	var tag [4]byte
	rand.Read(tag[:])
	name := path.Join(dir, tempName("mq-probe-"+hex.EncodeToString(tag[:]), s.Writer))
	f, err := s.Client.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return isFailure(err)
	}
	_, err = f.Write(make([]byte, probeBytes))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	s.Client.Remove(name)
	return isFailure(err)
}

// isFailure says err is an SFTP server's bare "Failure" (or v5's no
// space, quota exceeded).
func isFailure(err error) bool {
	var se *sftp.StatusError
	return errors.As(err, &se) && (se.Code == 4 || se.Code == 14 || se.Code == 15)
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
