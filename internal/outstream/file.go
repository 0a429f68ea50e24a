package outstream

import (
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
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}
