package stage

import (
	"context"
	"io"
	"time"
)

// A Place is somewhere files live: the CLS host's filesystem, or a site's
// data root. Files are named by their logical path P, the absolute path
// the file has on the CLS host; each Place maps P into its root with
// Rooted and refuses symbolic links that lead out of it.
type Place interface {
	// Open opens the regular file at p for reading.
	Open(ctx context.Context, p string) (io.ReadCloser, Info, error)
	// Stat describes the file at p.
	Stat(ctx context.Context, p string) (Info, error)
	// Create starts writing the file at p: the bytes go to a temporary
	// file beside it, which appears under p only at Commit.
	Create(ctx context.Context, p string) (Temp, error)
	// Remove removes the file at p.
	Remove(ctx context.Context, p string) error
}

// Info describes a file in a Place.
type Info struct {
	Size    int64
	ModTime time.Time
	Regular bool // a regular file, not a directory, device, pipe...
}

// A Temp is a file being written. Exactly one of Commit and Abort must be
// called; after either, the other is a no-op.
type Temp interface {
	io.Writer
	// Commit closes the temporary file and renames it into place,
	// replacing any file there.
	Commit(ctx context.Context) error
	// Abort closes and removes the temporary file.
	Abort() error
}

// tempName is the name of the temporary file that becomes base: hidden,
// recognisable, and unique among concurrent writers.
func tempName(base string) string {
	return "." + base + ".mq-tmp-" + randomHex(6)
}
