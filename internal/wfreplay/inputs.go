package wfreplay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mq-hpc/mq/protocol"
)

// MakeInputs makes each of a replay's own inputs (Replay.Inputs) in
// dir at its size (mqsub --wfformat), unless it is there at that size
// already (a replay run again); one there at another size is the
// user's, and left alone with an error.
func MakeInputs(dir string, files []File) error {
	for _, f := range files {
		p := filepath.Join(dir, f.Path)
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.Mode().IsRegular() && fi.Size() == f.Size:
			continue
		case err == nil:
			return fmt.Errorf("%s is there already and is not the replay's input (%s, want a file of %d bytes): remove it or replay in another directory", protocol.Quote(p), describe(fi), f.Size)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("input %s: %w", protocol.Quote(p), errors.Unwrap(err))
		}
		out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("making input %s: %w", protocol.Quote(p), errors.Unwrap(err))
		}
		err = out.Truncate(f.Size)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(p)
			return fmt.Errorf("making input %s: %w", protocol.Quote(p), err)
		}
	}
	return nil
}

func describe(fi fs.FileInfo) string {
	if fi.Mode().IsRegular() {
		return fmt.Sprintf("%d bytes", fi.Size())
	}
	return "not a regular file"
}
