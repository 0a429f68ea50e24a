package spool

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// FS is where the CLS reads a spool: its own host's filesystem (OS), or a
// login host's over SFTP.
type FS interface {
	Lstat(name string) (fs.FileInfo, error)
	ReadDir(name string) ([]fs.FileInfo, error)
	// Open opens a file to read; Stat of it is its own, not a link's.
	Open(name string) (Handle, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	// Owner is the uid that owns a file Lstat or ReadDir described (-1:
	// not known).
	Owner(fi fs.FileInfo) int
}

// Handle is an open spool file.
type Handle interface {
	io.ReadCloser
	Stat() (fs.FileInfo, error)
}

// OS is the CLS host's filesystem.
type OS struct{}

func (OS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

func (OS) ReadDir(name string) ([]fs.FileInfo, error) {
	es, err := os.ReadDir(name)
	var fis []fs.FileInfo
	for _, e := range es {
		if fi, err := e.Info(); err == nil { // gone meanwhile: skipped
			fis = append(fis, fi)
		}
	}
	return fis, err
}

// Open never follows a link: a link put in place of a file checked is
// refused.
func (OS) Open(name string) (Handle, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

func (OS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (OS) Remove(name string) error             { return os.Remove(name) }
func (OS) Owner(fi fs.FileInfo) int             { return ownerOS(fi) }

// Refused says the CLS refused a spool file's reports for what they say
// (Deliver sets it aside rather than try it again).
type Refused struct{ Err error }

func (e Refused) Error() string { return e.Err.Error() }
func (e Refused) Unwrap() error { return e.Err }

// staleTemp is how old a file left being written (by an agent killed
// mid-write) is before Deliver removes it.
const staleTemp = time.Hour

// Deliver applies the spool files in dir, on fsys, that the user uid
// owns: apply records a file's reports as its placeholder's own report
// (committed when it returns nil), and the file is removed after. A file
// Deliver cannot use (not the user's, a link, writable by others, too
// large, not a spool file, or reports apply refuses with Refused) is set
// aside as NAME.bad, with one line in log, and the others go on. It
// returns the reports applied, and an error that stopped it: dir itself
// is not to be trusted, or apply failed otherwise (the store is closing,
// its disk full): the files not applied stay for the next call.
func Deliver(fsys FS, dir string, uid int, apply func(File) error, log *slog.Logger) (int, error) {
	fi, err := fsys.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	if err := checkDir(dir, fi, fsys.Owner(fi), uid); err != nil {
		return 0, err
	}
	fis, err := fsys.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	applied := 0
	for _, fi := range fis {
		name := fi.Name()
		p := path.Join(dir, name)
		if strings.HasPrefix(name, tmpPrefix) && time.Since(fi.ModTime()) > staleTemp {
			fsys.Remove(p)
		}
		if !strings.HasSuffix(name, Suffix) || strings.HasPrefix(name, ".") {
			continue
		}
		f, err := read(fsys, p, uid)
		if err == nil {
			onCLSClock(&f, p, log)
			err = apply(f)
			var refused Refused
			if err != nil && !errors.As(err, &refused) {
				return applied, fmt.Errorf("spool: applying %s: %w", p, err)
			}
		}
		if err != nil {
			setAside(fsys, p, err, log)
			continue
		}
		applied += len(f.Reports)
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			// Applied again next time: a late report, which changes nothing.
			log.Warn("could not remove a report spool file applied", "file", p, "err", err)
		}
	}
	return applied, nil
}

// read reads and checks spool file p.
func read(fsys FS, p string, uid int) (File, error) {
	fi, err := fsys.Lstat(p)
	if err != nil {
		return File{}, err
	}
	if err := checkFile(fi, fsys.Owner(fi), uid); err != nil {
		return File{}, err
	}
	h, err := fsys.Open(p)
	if err != nil {
		return File{}, err
	}
	defer h.Close()
	if fi, err = h.Stat(); err != nil {
		return File{}, err
	}
	if err := checkFile(fi, fsys.Owner(fi), uid); err != nil {
		return File{}, err
	}
	data, err := io.ReadAll(io.LimitReader(h, MaxBytes+1))
	if err != nil {
		return File{}, err
	}
	return Decode(data)
}

func checkFile(fi fs.FileInfo, owner, uid int) error {
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	case owner != uid:
		return fmt.Errorf("belongs to uid %d, not this user (%d)", owner, uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("writable by others (mode %v)", fi.Mode().Perm())
	case fi.Size() > MaxBytes:
		return fmt.Errorf("%d bytes, over %d", fi.Size(), MaxBytes)
	}
	return nil
}

// onCLSClock moves the times of f's reports, from file p, onto the CLS's
// clock (File.OnCLSClock), saying so in log.
func onCLSClock(f *File, p string, log *slog.Logger) {
	off, err := f.OnCLSClock()
	if err != nil {
		// The reports are the agent's all the same: their jobs ended.
		log.Warn("a report spool file's clock offset is not believable; its reports' times are taken as they are", "file", p, "err", err)
	} else if off != 0 {
		log.Warn("a placeholder's clock was off from the CLS's; the times of the reports it spooled are moved onto the CLS's clock", "file", p, "placeholder", f.Placeholder, "behind", off.Round(time.Second))
	}
}

// setAside renames a spool file Deliver cannot use out of its way, so it
// is neither tried again nor lost to whoever looks into it.
func setAside(fsys FS, p string, why error, log *slog.Logger) {
	err := fsys.Rename(p, p+badSuffix)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// Tried again next time, and set aside again.
		log.Warn("a report spool file cannot be used, nor set aside", "file", p, "why", why, "err", err)
		return
	}
	log.Warn("set aside a report spool file that cannot be used; its jobs run again when their leases run out", "file", p+badSuffix, "why", why)
}

// CheckRefused wraps err as Refused when the CLS answered it so for what
// the reports say (a bad request, a placeholder not the site's).
func CheckRefused(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) && (pe.Code == protocol.CodeBadRequest || pe.Code == protocol.CodeForbidden) {
		return Refused{err}
	}
	return err
}
