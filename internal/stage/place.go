package stage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// tempName is the name of the temporary file that becomes base when
// written by writer (see SFTP.Writer): hidden, recognisable, and one per
// target and writer, so that what a killed writer left is found again by
// its next write of the same file: Create takes it over (removes it and
// creates its own, exclusively). A Mover runs one transfer of a path to
// a place at a time, so a writer never takes over a file still being
// written; two places over one directory (two sites on one login account
// and data root) have different writers and never meet.
func tempName(base, writer string) string {
	if writer == "" {
		return "." + base + TempSuffix
	}
	h := sha256.Sum256([]byte(writer))
	return "." + base + TempSuffix + "-" + hex.EncodeToString(h[:4])
}

// TempSuffix marks the name of a file being written: ".NAME" + TempSuffix
// (+ "-" and a writer's tag) is NAME in the making, or what an
// interrupted transfer left of it.
const TempSuffix = ".mq-part"
