package purge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// StreamGrace is how long a stream file stays after its last write
// before a purge may delete it, whatever the extents say: a placeholder
// that died just after sending a report may have the report's extents
// committed after the sweep read them.
const StreamGrace = time.Minute

// magicLen is the size of a stream file that holds no chunk yet (its
// header, "MQSTRM01"): an agent creates the file, then locks it, and a
// sweep between the two must not take it.
const magicLen = 8

// RemoveStreams deletes the stream files in outputDir's streams
// directory that no output extent names any more and no live agent holds
// (each agent flocks its files while it lives): the purged jobs' outputs
// were their last. Only regular files named as protocol.StreamFileName
// names them, holding a chunk at least and unmodified for grace, go; the
// lock is taken without waiting, so a live agent's file is never touched.
// now is the wall clock (files' times are). It returns the bytes freed; a
// file it cannot remove stays for the next purge.
func RemoveStreams(ctx context.Context, q Querier, outputDir string, grace time.Duration, now time.Time) (int64, error) {
	if outputDir == "" {
		return 0, nil
	}
	dir := filepath.Join(outputDir, protocol.StreamDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var names []string
	for _, e := range entries {
		if _, ok := protocol.StreamFileOwner(e.Name()); ok && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return 0, nil
	}
	named, err := streamFilesNamed(ctx, q)
	if err != nil {
		return 0, err
	}
	var bytes int64
	for _, name := range names {
		if named[name] {
			continue
		}
		bytes += removeStream(filepath.Join(dir, name), grace, now)
	}
	return bytes, nil
}

// streamFilesNamed reads the set of files extents name.
func streamFilesNamed(ctx context.Context, q Querier) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, queries.Get("StreamFilesNamed"))
	if err != nil {
		return nil, err
	}
	named := map[string]bool{}
	for rows.Next() {
		var f string
		if err := rows.Scan(&f); err != nil {
			rows.Close()
			return nil, err
		}
		named[f] = true
	}
	return named, closeRows(rows)
}

// removeStream removes the stream file at path if nobody holds it, and
// says how many bytes went. Anything not as expected keeps the file.
func removeStream(path string, grace time.Duration, now time.Time) int64 {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0 // gone meanwhile, or a link: not ours to remove
	}
	defer f.Close() // unlocks
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() <= magicLen || now.Sub(fi.ModTime()) < grace {
		return 0
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return 0 // a live agent's
	}
	// The name may have been given to another file since it was opened:
	// remove it only if it is still the one locked.
	if li, err := os.Lstat(path); err != nil || !os.SameFile(fi, li) || os.Remove(path) != nil {
		return 0
	}
	return fi.Size()
}
