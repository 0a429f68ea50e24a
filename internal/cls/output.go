package cls

import (
	"context"
	"errors"
	"io"
	"iter"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/internal/web"
	"github.com/mq-hpc/mq/protocol"
)

// Following a job's output. The CLS keeps nothing of it in memory: a local
// placeholder writes the job's output files, or its stream files, where
// the CLS reads them (a stream file's chunks as they come: streams.go), and
// a remote one ships what a followed job writes while it runs (heartbeat
// replies list the followed attempts; see placeholder/live.go) into the
// CLS's copy, at the paths mqstat -j names.
// A follower reads the file from where it left off whenever a staged chunk
// arrives (Server.OnOutput) or, for local files nobody announces, every
// pollEvery; the store says when the job has ended (a parked wait), and
// every recheckEvery whether it has a new attempt (requeued).

// Defaults of outputs.
const (
	pollEvery    = 200 * time.Millisecond
	recheckEvery = time.Second
	// maxFollowers bounds the streams followed at once through the
	// socket and SSH (mqstat --cat --follow): each holds a goroutine, a
	// frame buffer and a parked wait in the store. maxDashFollowers bounds
	// the dashboard's apart (its pages also pass web's stream limits), so
	// however many pages follow output, mqstat still may.
	maxFollowers     = 1024
	maxDashFollowers = web.DefaultMaxStreams
)

// outputStore is what reading jobs' output needs of the store.
type outputStore interface {
	JobOutput(ctx context.Context, id int64) (protocol.JobDetail, error)
	WaitFor(ctx context.Context, req protocol.Wait) (protocol.WaitReply, error)
}

// outputs serves op output.stream and CLS.Output.
type outputs struct {
	store outputStore
	// streamDir is where local placeholders write stream files (the
	// CLS's output/streams): a running attempt's output is read there.
	streamDir string
	poll      time.Duration // 0: pollEvery
	recheck   time.Duration // 0: recheckEvery
	max       int           // 0: maxFollowers
	dashMax   int           // 0: maxDashFollowers

	mu        sync.Mutex
	followers int              // through the socket and SSH
	dash      int              // the dashboard's
	watch     map[int64]*watch // followed jobs only
	nwatch    atomic.Int32     // len(watch), read without mu by followed
}

// watch wakes a job's followers: ch is closed, and replaced, when output
// of the job is staged.
type watch struct {
	ch chan struct{}
	n  int // followers
}

func (o *outputs) install(srv *server.Server) {
	server.RouteStream(srv, protocol.OpOutputStream, func(ctx context.Context, q protocol.OutputQuery, send func(protocol.OutputFrame) error) error {
		return o.read(ctx, q, 0, false, send)
	})
	srv.OnOutput = o.staged
	srv.Followed = o.followed
}

// followed picks the attempts of followed jobs from a heartbeat's list: a
// placeholder that stages output ships theirs while they run. With nobody
// following, as almost always, it costs an atomic load per heartbeat.
func (o *outputs) followed(running []protocol.JobRef) []protocol.JobRef {
	if o.nwatch.Load() == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var refs []protocol.JobRef
	for _, r := range running {
		if o.watch[r.ID] != nil {
			refs = append(refs, r)
		}
	}
	return refs
}

// staged wakes the followers of job id.
func (o *outputs) staged(id int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w := o.watch[id]; w != nil {
		close(w.ch)
		w.ch = make(chan struct{})
	}
}

// join counts a follower of job id in, or refuses one too many: of the
// dashboard's when dash, else of the socket's and SSH's.
func (o *outputs) join(id int64, dash bool) (wake func() <-chan struct{}, leave func(), err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, limit := &o.followers, o.max
	if limit <= 0 {
		limit = maxFollowers
	}
	if dash {
		n, limit = &o.dash, o.dashMax
		if limit <= 0 {
			limit = maxDashFollowers
		}
	}
	if *n >= limit {
		return nil, nil, protocol.Errorf(protocol.CodeBusy, "%d streams of output are followed already; try again later", *n)
	}
	if o.watch == nil {
		o.watch = map[int64]*watch{}
	}
	w := o.watch[id]
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		o.watch[id] = w
		o.nwatch.Store(int32(len(o.watch)))
	}
	w.n++
	*n++
	wake = func() <-chan struct{} {
		o.mu.Lock()
		defer o.mu.Unlock()
		return w.ch
	}
	leave = func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		*n--
		if w.n--; w.n == 0 {
			delete(o.watch, id)
			o.nwatch.Store(int32(len(o.watch)))
		}
	}
	return wake, leave, nil
}

// checkStream says which stream q asks for.
func checkStream(q protocol.OutputQuery) (string, error) {
	switch q.Stream {
	case "", "stdout":
		return "stdout", nil
	case "stderr":
		return "stderr", nil
	}
	return "", protocol.Errorf(protocol.CodeBadRequest, "stream must be stdout or stderr, not %q", protocol.ClipText(q.Stream, 64))
}

// ended reports whether a job in state is over: done, failed, deleted or
// blocked by a failed prerequisite.
func ended(state string) bool {
	switch state {
	case "D", "F", "X", "B":
		return true
	}
	return false
}

// outputPath is where the CLS reads a stream of the job's current attempt:
// its copy of what a remote placeholder staged, else the file a local
// placeholder writes ("" before the job has run). The placeholder's own
// path is read only when it is in the CLS's output directory (no copy is
// named then): a remote placeholder chooses its directory, and must not
// make the CLS read whatever file it names.
func outputPath(d protocol.JobDetail, stream string) string {
	path, cp := d.Stdout, d.StdoutCopy
	if stream == "stderr" {
		path, cp = d.Stderr, d.StderrCopy
	}
	if cp != "" {
		return cp
	}
	return path
}

// tail sends what the file at path holds from off on, in frames of at
// most protocol.MaxOutputFrame, and returns the offset it reached. An
// absent file is no output yet.
func tail(path string, attempt int, off int64, buf []byte, send func(protocol.OutputFrame) error) (int64, error) {
	if path == "" {
		return off, nil
	}
	f, _, err := outstream.OpenFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return off, nil
	}
	if err != nil {
		return off, err
	}
	defer f.Close()
	for {
		n, err := f.ReadAt(buf, off)
		if n > 0 {
			data := make([]byte, n) // the receiver may keep it
			copy(data, buf[:n])
			if err := send(protocol.OutputFrame{Attempt: attempt, Offset: off, Data: data}); err != nil {
				return off, err
			}
			off += int64(n)
		}
		if err == io.EOF || n == 0 {
			return off, nil
		}
		if err != nil {
			return off, err
		}
	}
}

// read streams q's output: what the job's latest attempt has written and,
// with q.Follow, what it writes until the job ends, then a frame with End.
// send blocks while the receiver is slow: a follower holds one frame
// buffer, whatever the job writes. A followed stream with last > 0 starts
// at the last bytes written so far (the dashboard's page shows no
// more), not at the start. dash says whose follower it is (join).
func (o *outputs) read(ctx context.Context, q protocol.OutputQuery, last int64, dash bool, send func(protocol.OutputFrame) error) error {
	stream, err := checkStream(q)
	if err != nil {
		return err
	}
	d, err := o.store.JobOutput(ctx, q.ID)
	if err != nil {
		return err
	}
	buf := make([]byte, protocol.MaxOutputFrame)
	if !q.Follow {
		var ls *liveStream
		if _, err := o.tailAttempt(&ls, d, stream, d.Attempts, 0, buf, send); err != nil {
			return err
		}
		if ended(d.State) {
			return send(endFrame(d, stream))
		}
		return nil
	}

	wake, leave, err := o.join(q.ID, dash)
	if err != nil {
		return err
	}
	defer leave()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The store parks the wait and answers when the job ends: the job's
	// last output is in place by then (an attempt is reported after its
	// output is written, and staged).
	end := make(chan error, 1)
	go func() {
		_, err := o.store.WaitFor(ctx, protocol.Wait{IDs: []int64{q.ID}})
		end <- err
	}()
	poll, recheck := o.poll, o.recheck
	if poll <= 0 {
		poll = pollEvery
	}
	if recheck <= 0 {
		recheck = recheckEvery
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	checked := time.Now()
	var off int64
	if last > 0 {
		if fi, err := os.Stat(outputPath(d, stream)); err == nil && fi.Size() > last {
			off = fi.Size() - last
		} else if l := o.live(nil, d, stream, d.Attempts); l != nil {
			if n := l.size(); n > last {
				off = n - last
			}
		}
	}
	attempt := d.Attempts
	var ls *liveStream
	for {
		woken := wake() // before reading: a chunk staged meanwhile wakes us again
		if off, err = o.tailAttempt(&ls, d, stream, attempt, off, buf, send); err != nil {
			return err
		}
		select {
		case err := <-end:
			if err != nil {
				return err
			}
			if d, err = o.store.JobOutput(ctx, q.ID); err != nil {
				return err
			}
			if d.Attempts != attempt {
				attempt, off = d.Attempts, 0
			}
			if _, err := tailJob(d, stream, attempt, off, buf, send); err != nil {
				return err
			}
			return send(endFrame(d, stream))
		case <-woken:
		case <-tick.C:
			if time.Since(checked) < recheck {
				continue
			}
			checked = time.Now()
			nd, err := o.store.JobOutput(ctx, q.ID)
			if err != nil {
				return err
			}
			if nd.Attempts != attempt {
				// Requeued and started again: the new attempt's output
				// starts at 0. What the old one wrote after our last look
				// is in its file; mqstat -j names it.
				attempt, off = nd.Attempts, 0
			}
			d = nd
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tailAttempt is tailJob, and for a running attempt with no output file,
// what it wrote so far to its placeholder's stream file (*ls follows it
// from one call to the next).
func (o *outputs) tailAttempt(ls **liveStream, d protocol.JobDetail, stream string, attempt int, off int64, buf []byte, send func(protocol.OutputFrame) error) (int64, error) {
	n, err := tailJob(d, stream, attempt, off, buf, send)
	if err != nil || n != off {
		return n, err
	}
	if *ls = o.live(*ls, d, stream, attempt); *ls != nil {
		return (*ls).tail(n, buf, send)
	}
	return n, nil
}

// endFrame says how the job of d ended, and what of stream was lost.
func endFrame(d protocol.JobDetail, stream string) protocol.OutputFrame {
	return protocol.OutputFrame{
		Attempt: d.Attempts,
		End:     &protocol.JobEnd{ID: d.ID, State: d.State, Exit: d.Exit, Reason: d.Reason},
		Lost:    protocol.LostFor(d.OutputLost, stream),
	}
}

// Output streams one stream ("stdout" or "stderr") of job q.ID's output,
// as op output.stream does: what its latest attempt has written and, with
// q.Follow, what it writes until the job ends; a followed stream's last
// frame has End. Each frame's Data is the receiver's to keep. Iteration
// ends at the first error (refused query, unknown job, too many
// followers, ctx done), yielded with a zero frame; breaking out of the
// loop stops following. Memory held is one frame buffer, whatever the
// job writes.
func (c *CLS) Output(ctx context.Context, q protocol.OutputQuery) iter.Seq2[protocol.OutputFrame, error] {
	return c.outputs.seq(ctx, q, 0, false)
}

// seq is Output; a followed stream with last > 0 starts at the last bytes
// written so far, and one with dash counts as the dashboard's (see read).
func (o *outputs) seq(ctx context.Context, q protocol.OutputQuery, last int64, dash bool) iter.Seq2[protocol.OutputFrame, error] {
	return func(yield func(protocol.OutputFrame, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := errors.New("stopped")
		err := o.read(ctx, q, last, dash, func(f protocol.OutputFrame) error {
			if !yield(f, nil) {
				return stop
			}
			return nil
		})
		if err != nil && err != stop {
			yield(protocol.OutputFrame{}, err)
		}
	}
}
