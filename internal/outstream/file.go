package outstream

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ReadFile is Read from the stream file at path (never through a
// symbolic link: the path comes from a record, the file from a
// placeholder).
func ReadFile(dst io.Writer, path string, t Tag, ext Extent) (int64, error) {
	f, err := open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := Read(dst, f, t, ext)
	if err != nil {
		return n, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// ReadFileTail is ReadTail from the stream file at path, opened as
// ReadFile opens it.
func ReadFileTail(dst io.Writer, path string, t Tag, ext Extent, limit int64) (truncated bool, err error) {
	f, err := open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	truncated, err = ReadTail(dst, f, t, ext, limit)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return truncated, nil
}

func open(path string) (*os.File, error) {
	f, _, err := OpenFile(path)
	return f, err
}

// ErrNotRegular is an output path that names no regular file: a FIFO, a
// device, a directory.
var ErrNotRegular = errors.New("not a regular file")

// OpenFile opens a job's output file, or a stream file, for reading, as
// every reader of output must: never through a symbolic link at the last
// name (the path is a record's, the file a job's or a placeholder's),
// never waiting for a writer (a job may leave a FIFO where its output
// was: opening it would hold the reader until someone writes), and only
// a regular file (ErrNotRegular).
func OpenFile(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}
