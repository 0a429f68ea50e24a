// Package argfile resolves the paths mq's commands are given (Path:
// relative to the command's directory, which over SSH is not the CLS
// process's) and opens the files they read because an argument names
// them (mqsub -f FILE, mqsub --wfformat FILE). Over SSH such a
// command runs inside the CLS's process (the SSH endpoint of cls serve),
// where a name is the CLS host's and the reader is the CLS itself: there
// only a regular file is read, so /dev/stdin is not taken for the CLS's
// own stdin, and neither /dev/zero nor a FIFO keeps the CLS reading (or
// waiting for a writer). A local command reads what its user names
// (mqsub -f /dev/stdin, a pipe from a shell's <(...)): it is the user's
// own process.
package argfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Path is name, an argument, as a clean absolute path: a relative name
// is taken from the command's directory (getwd), which over SSH is the
// home directory, not the CLS process's own.
func Path(name string, getwd func() (string, error)) (string, error) {
	if filepath.IsAbs(name) {
		return filepath.Clean(name), nil
	}
	wd, err := getwd()
	if err != nil {
		return "", err
	}
	return filepath.Join(wd, name), nil
}

// ErrNotRegular is a name refused where only regular files are read.
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading. With regularOnly it opens only a regular
// file (a symbolic link is followed: it is the user's own): anything
// else is refused before it is opened (opening a device may act on it),
// and, when one was swapped in meanwhile, once it is open, without
// waiting for a writer. Its errors are *fs.PathError.
func Open(path string, regularOnly bool) (*os.File, error) {
	if !regularOnly {
		return os.Open(path)
	}
	notRegular := &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, notRegular
	}
	// O_NONBLOCK: a FIFO would hold the open until a writer came; on a
	// regular file it changes nothing.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = notRegular
		}
		return nil, err
	}
	return f, nil
}

// ErrTooLarge is a file or stream longer than its reader's limit.
var ErrTooLarge = errors.New("too large")

// ReadAll reads r to its end, at most limit bytes: a longer r is
// ErrTooLarge, with no more than limit+1 bytes read.
func ReadAll(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return b, nil
}
