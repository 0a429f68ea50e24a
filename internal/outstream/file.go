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
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
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
