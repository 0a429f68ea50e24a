package netfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// Of returns the kind of filesystem dir is on.
func Of(dir string) (Kind, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return Kind(uint32(st.Type)), nil
}
