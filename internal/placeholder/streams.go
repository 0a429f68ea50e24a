package placeholder

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/internal/filelock"
	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/internal/placeholder/hung"
	"github.com/mq-hpc/mq/protocol"
)

// DefaultStreamRotate is Config.StreamRotate's default: a stream file past
// it is left for a new one.
const DefaultStreamRotate = 256 << 20

// DefaultStreamAge is Config.StreamAge's default: a stream file written
// to for this long is left for a new one at the next output, and let go
// once the CLS took every report naming it (settled), so that a purge can
// remove it: a placeholder living for weeks holds an hour of output.
const DefaultStreamAge = time.Hour

// streamSet is a placeholder's stream files (Config.Streams): every job's
// stdout and stderr are chunks appended to the current one, so a million
// short jobs leave a few files, not a million. Each file is named for the
// placeholder id it was written under (protocol.StreamFileName), which the
// CLS checks a report's extents against, and stays flock'ed while the
// agent writes to it or a report naming it is unacknowledged: a file
// nobody holds is a dead placeholder's, whose torn tail the next agent
// cuts, or one left whole, which a purge may remove.
type streamSet struct {
	dir    string
	rotate int64
	age    time.Duration
	log    *slog.Logger
	// sync commits a file (tests watch it); nil is Writer.Sync.
	sync func(*outstream.Writer) error
	// wait is how long a report waits for a sync (Agent.fsWait).
	wait func() time.Duration

	// mu is held across output's filesystem calls (a file made, dead
	// ones recovered), which may hang; filesMu only over memory, so
	// reports and the live shipper find a file whatever mu waits for.
	mu        sync.Mutex
	cur       *streamFile
	filesMu   sync.Mutex
	files     []*streamFile // the files this agent holds locked (not let go)
	byName    map[string]*streamFile
	made      int // under mu: the next file's number, after firstSeq
	recovered bool
	retryAt   time.Time         // when a file that failed a write may be left for a new one
	firstSeq  int               // the first file's number (tests start near protocol.MaxStreamFiles)
	onLetGo   func(name string) // tests: a file was let go
	// dropShipped removes a file let go, or settled at the agent's exit,
	// once the CLS's copy holds all of it (a remote placeholder's: kept,
	// they would fill a cluster home's quota with what the CLS has).
	dropShipped bool
}

// streamRetry is how often a placeholder whose stream file failed a write
// (a full disk, a file-size limit) tries a new file: the outputs written
// meanwhile are lost, but a disk that stays full costs an empty file a
// second, not one a job.
const streamRetry = time.Second

// streamFile is one open stream file.
type streamFile struct {
	w     *outstream.Writer
	name  string // protocol.StreamFileName
	owner int64  // the placeholder id in its name
	lock  *os.File
	born  time.Time

	// Under filesMu: what keeps a file left for a new one (left) held:
	// outputs being written (open), and extents whose report the CLS has
	// not taken, by last chunk (unacked; one dropped from its report, its
	// sync failed, keeps the file until the agent exits).
	left    bool
	open    int
	unacked map[int64]struct{}
	gone    bool // let go: closed, removed from the set

	syncMu sync.Mutex
	synced int64 // the file is on disk up to here
	// syncing is closed when the sync out, begun at syncStart, returns
	// (nil: none is out).
	syncing   chan struct{}
	syncStart time.Time
	// Syncs failed, the last for syncErr, while the file held
	// (lostFrom, lostTo] unsynced: that part may be lost, whatever later
	// syncs say.
	lostFrom, lostTo int64
	syncErr          error

	// A remote placeholder's file is copied to the CLS (ship.go).
	shipMu  sync.Mutex
	shipped int64    // the CLS's copy holds the file up to here
	rd      *os.File // read to ship, opened at the first piece
	refused error    // the CLS refused the file for good (forbidden): not asked again
	closed  bool     // let go: nothing is shipped from it any more
	// copied: a piece went into a copy of the CLS's own; kept: a piece's
	// reply did not say so (the file may be the very one the CLS reads).
	copied, kept bool
}

func newStreamSet(outDir string, rotate int64, log *slog.Logger) *streamSet {
	if rotate <= 0 {
		rotate = DefaultStreamRotate
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &streamSet{dir: filepath.Join(outDir, protocol.StreamDir), rotate: rotate, age: DefaultStreamAge, log: log, wait: func() time.Duration { return defaultFSWait }}
}

// streamFlushAfter is how long bytes a job wrote may wait in its
// output's buffer before they are written as a chunk, for a follower to
// see them while the job runs (the CLS reads the chunks as they come).
// A job that ends sooner, most, writes its output as one chunk.
const streamFlushAfter = 100 * time.Millisecond

// streamOut is one output being written into a stream file: the sink's
// writer, which on Close keeps the output's extent for the report.
type streamOut struct {
	set *streamSet
	f   *streamFile
	tag outstream.Tag

	mu    sync.Mutex // the sink's copy and the flush timer
	o     *outstream.Output
	flush *time.Timer // armed while bytes wait in o's buffer
	ext   outstream.Extent
	done  bool // closed and written whole
	ended bool // Close was called
}

func (so *streamOut) Write(p []byte) (int, error) {
	so.mu.Lock()
	defer so.mu.Unlock()
	n, err := so.o.Write(p)
	if so.flush == nil && so.o.Buffered() > 0 {
		so.flush = time.AfterFunc(streamFlushAfter, so.flushNow)
	}
	return n, err
}

// markCut says the attempt's cap (outputLimit) dropped bytes of this
// output: its extent is reported cut.
func (so *streamOut) markCut() {
	so.mu.Lock()
	defer so.mu.Unlock()
	so.o.MarkCut()
}

// flushNow writes the bytes waiting as a chunk; an error is Close's too
// (the Writer keeps it).
func (so *streamOut) flushNow() {
	so.mu.Lock()
	defer so.mu.Unlock()
	so.flush = nil
	if !so.done {
		so.o.Flush()
	}
}

func (so *streamOut) Close() error {
	so.mu.Lock()
	defer so.mu.Unlock()
	if so.flush != nil {
		so.flush.Stop()
		so.flush = nil
	}
	if so.ended {
		return nil
	}
	so.ended = true
	ext, err := so.o.Close()
	so.set.closed(so.f, ext, err == nil)
	if err != nil {
		return err
	}
	so.ext, so.done = ext, true
	return nil
}

// output starts output t in the current stream file of placeholder ph,
// opening a new file first when there is none, it is ph's no more (the
// agent registered anew), it passed its size or its age (aged) or it
// failed a write (at most once every streamRetry: failed).
func (s *streamSet) output(ph int64, t outstream.Tag) (*streamOut, error) {
	if ph <= 0 {
		return nil, errors.New("output stream: the placeholder has no id yet")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.recovered {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return nil, fmt.Errorf("output stream: %w", err)
		}
		s.recoverDead()
		s.recovered = true
	}
	if s.cur == nil || s.cur.owner != ph || s.cur.w.Size() >= s.rotate || s.aged() || s.failed() {
		f, err := s.create(ph)
		if err != nil {
			return nil, fmt.Errorf("output stream: %w", err)
		}
		old := s.cur
		s.cur = f
		s.filesMu.Lock()
		s.files = append(s.files, f)
		if s.byName == nil {
			s.byName = map[string]*streamFile{}
		}
		s.byName[f.name] = f
		var idle *streamFile
		if old != nil {
			old.left = true
			idle = s.settled(old)
		}
		s.filesMu.Unlock()
		s.letGo(idle)
	}
	s.filesMu.Lock()
	s.cur.open++
	s.filesMu.Unlock()
	// The cap is the agent's (outputLimit): it stops the job.
	return &streamOut{set: s, f: s.cur, o: s.cur.w.Output(t, 0), tag: t, ext: outstream.Extent{Last: -1}}, nil
}

// aged says whether the current file has been written to for s.age: one
// holding no chunk yet is not left (it would only make another empty one).
func (s *streamSet) aged() bool {
	return time.Since(s.cur.born) >= s.age && s.cur.w.Size() > int64(len(outstream.Magic))
}

// closed notes that an output in f was closed; ok: written whole, so its
// extent, if it has one, is reported.
func (s *streamSet) closed(f *streamFile, ext outstream.Extent, ok bool) {
	s.filesMu.Lock()
	f.open--
	if ok && ext.Last >= 0 {
		if f.unacked == nil {
			f.unacked = map[int64]struct{}{}
		}
		f.unacked[ext.Last] = struct{}{}
	}
	idle := s.settled(f)
	s.filesMu.Unlock()
	s.letGo(idle)
}

// acked notes the reports the CLS acknowledged (or refused: they are not
// sent again), whose extents keep their files no more.
func (s *streamSet) acked(rs []protocol.Report) {
	var idle []*streamFile
	s.filesMu.Lock()
	for _, r := range rs {
		for _, st := range r.Streamed {
			f := s.byName[st.File]
			if f == nil {
				continue
			}
			delete(f.unacked, st.Last)
			if g := s.settled(f); g != nil {
				idle = append(idle, g)
			}
		}
	}
	s.filesMu.Unlock()
	for _, f := range idle {
		s.letGo(f)
	}
}

// settled takes f out of the set, and returns it, when nothing keeps it
// any more (streamFile.left); filesMu is held.
func (s *streamSet) settled(f *streamFile) *streamFile {
	if f.gone || !f.left || f.open > 0 || len(f.unacked) > 0 {
		return nil
	}
	f.gone = true
	delete(s.byName, f.name)
	s.files = slices.DeleteFunc(s.files, func(g *streamFile) bool { return g == f })
	return f
}

// letGo closes a file settled took out and frees its lock, in a goroutine
// of its own: the close syncs, which may hang with the filesystem, and
// its callers are a job's output and the reports.
func (s *streamSet) letGo(f *streamFile) {
	if f == nil {
		return
	}
	go func() {
		f.shipMu.Lock()
		f.closed = true
		if f.rd != nil {
			f.rd.Close()
			f.rd = nil
		}
		f.shipMu.Unlock()
		s.drop(f) // under its lock: no agent recovering dead files opens it meanwhile
		if err := f.w.Close(); err != nil {
			s.log.Warn("closing a stream file left for a new one", "file", f.name, "err", err)
		}
		filelock.Close(f.lock)
		if s.onLetGo != nil {
			s.onLetGo(f.name)
		}
	}()
}

// failed says whether the current file failed a write and may be left
// for a new one now: its later writes would fail too, so without a new
// file every output after a disk filled up would be lost, even once it
// has room again.
func (s *streamSet) failed() bool {
	err := s.cur.w.Err()
	if err == nil || time.Now().Before(s.retryAt) {
		return false
	}
	s.retryAt = time.Now().Add(streamRetry)
	s.log.Warn("a stream file failed a write; the next outputs go to a new file", "file", s.cur.name, "err", err)
	return true
}

// drop removes f, which nothing keeps any more, if s.dropShipped and
// the CLS's copy holds all of it.
func (s *streamSet) drop(f *streamFile) {
	if !s.dropShipped {
		return
	}
	f.shipMu.Lock()
	size := f.w.Size()
	whole := f.refused == nil && !f.kept && (f.copied && f.shipped >= size || size <= int64(len(outstream.Magic)))
	f.shipMu.Unlock()
	if !whole {
		return
	}
	if err := os.Remove(filepath.Join(s.dir, f.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("could not remove a stream file the CLS has a copy of", "file", f.name, "err", err)
	}
}

// create makes ph's next stream file and locks it; s.mu is held.
func (s *streamSet) create(ph int64) (*streamFile, error) {
	for seq := s.firstSeq + s.made; ; seq++ {
		name := protocol.StreamFileName(ph, seq)
		path := filepath.Join(s.dir, name)
		w, err := outstream.Create(path)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		lock, err := os.Open(path)
		if err == nil {
			// Blocking: an agent recovering dead files may hold it an
			// instant, seeing a file only just made.
			err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
		}
		if err != nil {
			w.Close()
			if lock != nil {
				lock.Close()
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		s.made = seq - s.firstSeq + 1
		return &streamFile{w: w, name: name, owner: ph, lock: lock, born: time.Now()}, nil
	}
}

// recoverDead cuts the torn tail of every stream file in the directory no
// live agent holds: a placeholder killed while it wrote. Its attempt is
// run again.
func (s *streamSet) recoverDead() {
	outstream.RecoverUnheld(s.dir, func(path string, err error) {
		if err != nil {
			s.log.Warn("a stream file left by a placeholder cannot be read", "file", path, "err", err)
			return
		}
		s.log.Warn("cut the torn tail of a stream file left by a placeholder killed while it wrote", "file", path)
	})
}

// syncTo commits f past offset end (an output's last chunk: a chunk is
// whole in the file once the size passed its offset). Whoever syncs
// covers every chunk written before it: the outputs of a batch of reports
// share one sync. One sync of a file is out at a time; a sync that has
// not returned s.wait after it began (a hung filesystem) fails every
// caller waiting for it, so the reports go, saying the output was not
// synced, and the next callers fail at once until it returns.
func (s *streamSet) syncTo(f *streamFile, end int64) error {
	for {
		f.syncMu.Lock()
		if f.syncErr != nil && end > f.lostFrom && end <= f.lostTo {
			// Written before a sync that failed: the kernel may have dropped
			// those pages, and a later sync's success says nothing of them.
			err := f.syncErr
			f.syncMu.Unlock()
			return err
		}
		if f.synced >= end {
			f.syncMu.Unlock()
			return nil
		}
		if f.syncing == nil {
			s.startSync(f)
		}
		done, wait := f.syncing, s.wait()
		left := time.Until(f.syncStart.Add(wait))
		f.syncMu.Unlock()
		t := time.NewTimer(left)
		select {
		case <-done: // its outcome is read at the top
			t.Stop()
		case <-t.C:
			return &hung.Error{What: "fsync", After: wait}
		}
	}
}

// startSync syncs f in a goroutine of its own, up to its size now;
// f.syncMu is held.
func (s *streamSet) startSync(f *streamFile) {
	size := f.w.Size()
	sync := s.sync
	if sync == nil {
		sync = (*outstream.Writer).Sync
	}
	done := make(chan struct{})
	f.syncing, f.syncStart = done, time.Now()
	go func() {
		err := sync(f.w)
		f.syncMu.Lock()
		defer f.syncMu.Unlock()
		if err != nil {
			if f.syncErr == nil {
				f.lostFrom = f.synced
			}
			f.lostTo, f.syncErr = size, err
		} else {
			f.synced = max(f.synced, size)
		}
		f.syncing = nil
		close(done)
	}()
}

// close syncs and closes every file, releasing its lock.
func (s *streamSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.filesMu.Lock()
	defer s.filesMu.Unlock()
	for _, f := range s.files {
		f.gone = true
		if f.open == 0 && len(f.unacked) == 0 {
			s.drop(f)
		}
		f.w.Close()
		filelock.Close(f.lock)
		f.shipMu.Lock()
		if f.rd != nil {
			f.rd.Close()
		}
		f.shipMu.Unlock()
	}
	s.files, s.cur = nil, nil
}

// streamed returns the extents of an attempt's outputs written to stream
// files, for its report (syncReports syncs them before it leaves). A sink
// still draining (a process that escaped the job holds its pipe) is not
// reported: its output is not whole.
func (s *streamSet) streamed(sinks ...*sink) (out []protocol.Streamed) {
	for _, k := range sinks {
		if k == nil || k.out == nil {
			continue
		}
		select {
		case <-k.done:
		default:
			continue
		}
		so := k.out
		if !so.done || so.ext.Last < 0 {
			continue
		}
		out = append(out, protocol.Streamed{Stream: so.tag.Stream.String(), File: so.f.name, Last: so.ext.Last, Bytes: so.ext.Bytes, Cut: so.ext.Cut})
	}
	return out
}

// syncReports commits the stream files holding the outputs a batch of
// reports names, just before the batch leaves: a reported extent is on
// disk, and a batch costs one sync a file, not one a job. A remote
// placeholder (Config.StageOutput) ships the files' new bytes to the CLS
// instead (ship.go): the CLS reads its copy, and syncs it under --sync
// full. An output whose file could not be synced or shipped is not
// reported; its report says it was lost.
func (a *Agent) syncReports(ctx context.Context, batch []protocol.Report) {
	s := a.streams
	if s == nil {
		return
	}
	for i := range batch {
		r := &batch[i]
		if len(r.Streamed) == 0 {
			continue
		}
		kept, wrote := r.Streamed[:0], int64(0)
		var refused error
		for _, st := range r.Streamed {
			wrote += st.Bytes
			s.filesMu.Lock()
			f := s.byName[st.File]
			s.filesMu.Unlock()
			err := errors.New("not a file of this placeholder's")
			switch {
			case f != nil && a.cfg.StageOutput:
				if err = a.shipTo(ctx, f, st.Last+1); err != nil {
					a.log.Warn("could not copy a stream file to the CLS; it stays on this host", "file", st.File, "err", err)
					err = fmt.Errorf("not copied to the CLS (whole in %s on %s): %w", filepath.Join(s.dir, st.File), a.cfg.Host, err)
				}
			case f != nil:
				if err = s.syncTo(f, st.Last+1); err != nil {
					a.noteNoRoom(err) // a quota found at the sync (NFS): no more jobs meanwhile
					if diskroom.Refused(err) {
						refused = err
					}
					err = fmt.Errorf("sync %s: %w", st.File, err)
				}
			}
			if err != nil {
				r.OutputLost = protocol.ClipText(joinLost(r.OutputLost, fmt.Sprintf("%s: %v", st.Stream, err)), protocol.MaxReasonBytes)
				continue
			}
			kept = append(kept, st)
		}
		r.Streamed = kept
		if refused != nil && r.Reason == "" {
			a.syncRefused(r, refused, wrote)
		}
	}
}

// syncRefused turns the report of an attempt that ended on its own, and
// whose output a sync refused for want of room (a quota NFS shows only
// there), into one that runs again once there is room, as a write refused
// the same way does (outputLimit.refused): it ended done with its output
// lost. One that wrote at least what the write path lets fail fails.
func (a *Agent) syncRefused(r *protocol.Report, err error, wrote int64) {
	if r.Exit == 0 {
		r.Exit = 1
	}
	dir := filepath.Join(a.cfg.OutDir, protocol.StreamDir)
	if wrote >= max(a.cfg.OutputReserve, roomOwn) {
		r.Reason = protocol.ClipText(fmt.Sprintf("output: syncing it in %s failed: %s", dir, diskroom.Why(err)), protocol.MaxReasonBytes)
		return
	}
	r.Reason = protocol.ClipText(fmt.Sprintf("%s (syncing its output in %s failed: %s; the job wrote %d): it runs again once there is room",
		protocol.ReasonDiskFull, dir, diskroom.Why(err), wrote), protocol.MaxReasonBytes)
}
