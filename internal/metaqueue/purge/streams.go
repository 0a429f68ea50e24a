package purge

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/filelock"
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
	return sweepStreams(ctx, q, outputDir, grace, now, nil)
}

// CountStreams is RemoveStreams for a dry run: the bytes it would free
// once the extents going counts are gone (a dry run's jobs'; Going),
// nothing removed.
func CountStreams(ctx context.Context, q Querier, outputDir string, grace time.Duration, now time.Time, going Going) (int64, error) {
	if going == nil {
		going = Going{}
	}
	return sweepStreams(ctx, q, outputDir, grace, now, going)
}

// Going is how many extents of the jobs a dry run would purge name each
// stream file.
type Going map[string]int

// Add counts the extents of the jobs rows (a batch a dry run would
// purge) into g.
func (g Going) Add(ctx context.Context, q Querier, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	list, err := json.Marshal(ids(rows))
	if err != nil {
		return err
	}
	return countByFile(ctx, q, queries.Get("StreamFilesOf"), g, string(list))
}

// sweepStreams removes (going nil) or counts the stream files no extent
// names, but for going's.
func sweepStreams(ctx context.Context, q Querier, outputDir string, grace time.Duration, now time.Time, going Going) (int64, error) {
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
	named := map[string]int{}
	if err := countByFile(ctx, q, queries.Get("StreamFilesNamed"), named); err != nil {
		return 0, err
	}
	var bytes int64
	for _, name := range names {
		if named[name] > going[name] {
			continue
		}
		bytes += removeStream(filepath.Join(dir, name), grace, now, going != nil)
	}
	return bytes, nil
}

// countByFile adds the (file, extents) rows query gives to counts.
func countByFile(ctx context.Context, q Querier, query string, counts map[string]int, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
		var f string
		var n int
		if err := rows.Scan(&f, &n); err != nil {
			rows.Close()
			return err
		}
		counts[f] += n
	}
	return closeRows(rows)
}

// removeStream removes the stream file at path if nobody holds it, and
// says how many bytes went (dry: would go, and it stays). Anything not as
// expected keeps the file.
func removeStream(path string, grace time.Duration, now time.Time, dry bool) int64 {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0 // gone meanwhile, or a link: not ours to remove
	}
	defer filelock.Close(f)
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() <= magicLen || now.Sub(fi.ModTime()) < grace {
		return 0
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return 0 // a live agent's
	}
	if dry {
		return fi.Size()
	}
	// The name may have been given to another file since it was opened:
	// remove it only if it is still the one locked.
	if li, err := os.Lstat(path); err != nil || !os.SameFile(fi, li) || os.Remove(path) != nil {
		return 0
	}
	return fi.Size()
}
