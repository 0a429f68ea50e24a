package placeholder

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/protocol"
)

// sink copies one output stream of a job from a pipe into its file,
// creating the file only when the first byte arrives. Most short jobs write
// nothing, and creating two files per job cost more than running `true`
// (ext4 inode allocation is ~150 µs here). An absent file means no output.
// A pipe also means a job whose placeholder died gets EPIPE instead of
// writing on unseen; the placeholder's lease expires and it reruns elsewhere.
//
// With Config.Streams the output goes to the placeholder's stream file
// instead (streams.go), and out holds where it lies once done is closed.
type sink struct {
	path   string
	tag    outstream.Tag
	stream bool // into a stream file (Agent.streamed), not a file at path
	r      *os.File
	done   chan struct{}
	err    error
	out    *streamOut // set by drain, for a streamed output that held a byte
}

func (a *Agent) newSink(path string, tag outstream.Tag, stream bool, lim *outputLimit, also io.Writer) (s *sink, w *os.File, err error) {
	r, w, err := pipe()
	if err != nil {
		return nil, nil, err
	}
	s = &sink{path: path, tag: tag, stream: stream, r: r, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = a.drain(s, lim, also)
	}()
	return s, w, nil
}

// DefaultMaxOutput is Config.MaxOutput's default: 1 GiB per job attempt.
const DefaultMaxOutput = 1 << 30

// outputLimit is what one attempt's two streams may still write: the cap
// on their sum, and the free space kept on the output filesystem. The
// first stream that would pass either stops writing, says why, and
// closes over, for the run to kill the job.
type outputLimit struct {
	max, reserve int64
	capBy        string // where max comes from, for the reason
	dir          string // on the output filesystem (for the reserve)
	statfs       func(dir string) (diskroom.Free, error)

	mu      sync.Mutex
	written int64
	reason  string
	over    chan struct{} // closed once reason is set
	full    bool          // stopped for the reserve, or roomErr
	free    int64         // the free space then
	inodes  bool          // stopped for short inodes rather than bytes
	roomErr error         // a write refused for want of room (refused)
	// noRoom is told of a refused write (Agent.noteNoRoom: the agent pauses).
	noRoom func(error)
}

// newOutputLimit is the limit of an attempt of asg: the smaller of the
// agent's cap and the queue's (asg.MaxOutput, when in bounds).
func (a *Agent) newOutputLimit(dir string, asg protocol.Assignment) *outputLimit {
	l := &outputLimit{max: a.cfg.MaxOutput, capBy: "cls serve --max-output", reserve: a.cfg.OutputReserve, dir: dir, statfs: a.statfsWithin, over: make(chan struct{}), noRoom: a.noteNoRoom}
	if l.max == 0 {
		l.max = DefaultMaxOutput
	}
	if q := asg.MaxOutput; q > 0 && q <= protocol.MaxQueueOutput && (l.max < 0 || q < l.max) {
		l.max, l.capBy = q, "queue "+protocol.ClipText(asg.Queue, 64)+"'s --max-output"
	}
	return l
}

// take says how many of n more bytes may be written; fewer than n means
// the limit was reached (and the job is to be stopped).
func (l *outputLimit) take(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reason != "" {
		return 0
	}
	ok := int64(n)
	if l.max > 0 && l.written+ok > l.max {
		ok = l.max - l.written
		l.stop(fmt.Sprintf("output: stdout and stderr passed the cap of %d bytes per job (%s); the job was stopped", l.max, l.capBy))
	}
	if l.reserve > 0 {
		// The inodes are kept as the server keeps them (roomFor): a job's
		// output makes no new file, but what the CLS makes there does.
		if free, err := l.statfs(l.dir); err == nil && (free.Bytes-ok < l.reserve || free.InodesShort()) {
			ok = max(0, min(ok, free.Bytes-l.reserve))
			if free.InodesShort() {
				ok = 0
			}
			if l.reason == "" { // past the cap too: that is the job's own
				l.full, l.free, l.inodes = true, free.Bytes, free.InodesShort()
				l.stop("output: " + short(l.dir, free, l.reserve) + "; the job was stopped")
			}
		}
	}
	l.written += ok
	return int(ok)
}

// short says how dir's filesystem, with free, is short of the reserve.
func short(dir string, free diskroom.Free, reserve int64) string {
	if free.InodesShort() {
		return fmt.Sprintf("the disk of %s is nearly out of inodes (%d files free; %d are kept for the CLS, cls serve --output-reserve)", dir, free.Inodes, free.Keep)
	}
	return fmt.Sprintf("the disk of %s is nearly full (%d bytes free; %d are kept for the CLS, cls serve --output-reserve)", dir, free.Bytes, reserve)
}

func (l *outputLimit) stop(reason string) {
	l.reason = reason
	close(l.over)
}

// othersFilled is the reason of an attempt stopped for the reserve that
// wrote less than the reserve: the disk was filled by others (other jobs,
// other users, anything on the filesystem), not by it, and it is not to
// fail for that (protocol.ReasonDiskFull: it runs again once there is
// room). So is one stopped by a write refused for want of room that wrote
// less (roomRefused). "" for any other attempt: one whose output took the
// reserve would take it again, and fails.
func (l *outputLimit) othersFilled() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.roomErr != nil {
		return l.roomRefused()
	}
	if !l.full || l.written >= l.reserve {
		return ""
	}
	if l.inodes {
		return fmt.Sprintf("%s (the disk of %s is nearly out of inodes, a tenth of them or 65,536 are kept for the CLS, cls serve --output-reserve; the job wrote %d): it runs again once there is room",
			protocol.ReasonDiskFull, l.dir, l.written)
	}
	return fmt.Sprintf("%s (%d bytes free on the disk of %s; %d are kept for the CLS, cls serve --output-reserve; the job wrote %d): it runs again once there is room",
		protocol.ReasonDiskFull, l.free, l.dir, l.reserve, l.written)
}

// why is the reason the job was stopped ("" if it was not).
func (l *outputLimit) why() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reason
}

// limitedWriter writes to w what the limit allows; past it, it says so
// with errOverLimit.
type limitedWriter struct {
	w   io.Writer
	lim *outputLimit
}

var errOverLimit = errors.New("output limit reached")

func (lw limitedWriter) Write(p []byte) (int, error) {
	n := lw.lim.take(len(p))
	m, err := lw.w.Write(p[:n])
	if err != nil {
		lw.lim.refused(err) // for want of room: the job is stopped
		return m, err       // else output lost (reported), the job goes on: see drain
	}
	if n < len(p) {
		return m, errOverLimit
	}
	return m, nil
}

// pipe is os.Pipe with only the read end in the runtime's poller: the write
// end goes to the job and is closed at once, so registering it would cost
// two epoll_ctl calls per stream per job for nothing.
func pipe() (r, w *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	if err := syscall.SetNonblock(p[0], true); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, nil, os.NewSyscallError("setnonblock", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

func (a *Agent) drain(s *sink, lim *outputLimit, also io.Writer) error {
	r := s.r
	defer r.Close()
	buf := make([]byte, 32<<10)
	n, err := r.Read(buf)
	if n == 0 {
		if err == io.EOF {
			return nil
		}
		return heldOpen(err)
	}
	fc, err := a.openOutput(s)
	if err != nil {
		lim.refused(err)
		io.Copy(io.Discard, r) // keep the job from blocking on a full pipe
		return err
	}
	if also != nil { // mqsub -o, -e
		fc = teeCloser{fc, also}
	}
	f := limitedWriter{fc, lim}
	if _, err := f.Write(buf[:n]); err != nil {
		s.markCut(err)
		fc.Close()
		io.Copy(io.Discard, r)
		return overLimit(err)
	}
	_, err = io.CopyBuffer(f, onlyReader{r}, buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errHeldOpen // cut: what was read is kept
	} else if err != nil {
		// A write error (EIO, EFBIG) loses the output, not the job; at
		// the limit, or refused for want of room (outputLimit.refused),
		// the job is being stopped. Either way keep draining, so the job does not
		// block on (or die of) its pipe.
		s.markCut(err)
		io.Copy(io.Discard, r)
	}
	if cerr := fc.Close(); err == nil {
		err = cerr
		lim.refused(cerr) // a quota may show only at the close (NFS), or the stream's last chunk
	}
	return overLimit(err)
}

// streamed says whether an attempt's output goes into the placeholder's
// stream files: with Config.Streams, unless the CLS asked this placeholder
// (RegisterReply.OutputFiles) or the job's queue (Assignment.OutputFiles)
// for a file each. Decided once per attempt, before its output starts.
func (a *Agent) streamed(asg protocol.Assignment) bool {
	return a.streams != nil && !a.filesAsked.Load() && !asg.OutputFiles
}

// openOutput opens where a sink's output goes, at its first byte: its
// file, or an output in the placeholder's stream file.
func (a *Agent) openOutput(s *sink) (io.WriteCloser, error) {
	if s.stream {
		so, err := a.streams.output(a.ID(), s.tag)
		if err != nil {
			return nil, err
		}
		s.out = so
		return so, nil
	}
	dir := filepath.Dir(s.path)
	if _, ok := a.dirs.Load(dir); !ok {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		a.dirs.Store(dir, true)
	}
	create := a.create
	if create == nil {
		create = createOutput
	}
	return create(s.path)
}

// markCut marks a streamed output cut when err says the attempt's limit
// (its cap, or the output reserve) dropped its bytes: its reported extent
// says so, and mqstat -j with it.
func (s *sink) markCut(err error) {
	if s.out != nil && errors.Is(err, errOverLimit) {
		s.out.markCut()
	}
}

// overLimit is nil for errOverLimit: reaching the limit is the job's
// outcome (its reason), not output lost.
func overLimit(err error) error {
	if errors.Is(err, errOverLimit) {
		return nil
	}
	return err
}

// sinkWait bounds how long a report waits for a job's output to be written
// after the job ended: only a process that escaped the job's process group
// can hold the pipe open longer. The output is then cut there (sink.cut),
// and the report waits as long again for what was read to be written.
const sinkWait = 2 * time.Second

// errHeldOpen is why an output was cut at the job's end.
var errHeldOpen = errors.New("cut at the job's end: a process the job left running held it open")

// heldOpen is errHeldOpen for a read that cut ended, else err.
func heldOpen(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errHeldOpen
	}
	return err
}

// cut ends the sink's drain where it is: what was read is written and
// reported, and the pipe's read end closes, so a process left by the job
// that still holds the write end gets EPIPE instead of writing on unseen
// into a drain that would never end (and an open pipe, a goroutine and,
// with streams, an output never reported).
func (s *sink) cut() {
	s.r.SetReadDeadline(time.Now()) // the read end is in the poller: see pipe
}

// waitSinks waits for the streams to reach their files and says what
// could not be written ("" if all was).
func (a *Agent) waitSinks(asg protocol.Assignment, sinks ...*sink) (lost string) {
	deadline := time.NewTimer(sinkWait)
	defer deadline.Stop()
	// At each deadline one step more: kill what the job left behind
	// (killEscaped), else cut its outputs (sink.cut), else report without
	// them.
	const waiting, killed, cut = 0, 1, 2
	step := waiting
	for i := 0; i < len(sinks); {
		s := sinks[i]
		select {
		case <-s.done:
		case <-deadline.C:
			if step == waiting {
				step = killed
				n := a.killEscapedWithin(a.attemptID(asg.ID, asg.Attempt))
				if n > 0 {
					// The processes it left holding the pipe are gone: the
					// drains end at their EOF, with all that was written.
					a.log.Warn("killed the processes the job left running with its output open", "job", asg.ID, "killed", n)
					deadline.Reset(sinkWait)
					continue
				}
			}
			deadline.Reset(sinkWait) // after the look in /proc, which may take as long
			if step == cut {
				// A write of what was read does not return (a hung
				// filesystem): report without it.
				a.log.Warn("job output not written in time; reporting without it", "job", asg.ID, "file", s.path)
				return joinLost(lost, "output: not written in time")
			}
			step = cut
			a.log.Warn("a process left by the job still holds its output open; cutting the output there", "job", asg.ID, "file", s.path)
			for _, o := range sinks[i:] {
				o.cut()
			}
			continue
		}
		if s.err != nil {
			a.log.Warn("job output lost", "job", asg.ID, "file", s.path, "err", s.err)
			lost = joinLost(lost, fmt.Sprintf("%s: %v", [...]string{"stdout", "stderr"}[i%2], s.err))
		}
		i++
	}
	return lost
}
