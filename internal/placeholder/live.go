package placeholder

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/hung"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Live output. A remote placeholder copies each job's stdout and stderr to
// the CLS when the job ends (stage, in run.go). A job whose output someone
// follows (the CLS says which in its heartbeat replies) has them shipped
// while it runs, too, so that `mqstat --cat ID --follow` shows them as
// they are written: every liveEvery, what the job wrote since, at most
// liveChunk per stream and liveBudget in all (1 MiB/s per agent); what is
// left goes when the job ends, from where live shipping stopped, so no
// byte travels twice and the CLS stores nothing it would not have stored
// anyway. Jobs nobody follows, and every job of a local placeholder (it
// writes where the CLS reads), never meet it: it adds no work to their
// path, and no requests to the CLS.
//
// A job writing to a stream file (streams.go) has its output shipped live
// by the file: every streamLiveEvery while someone follows one of the
// agent's jobs, each of its stream files' growth goes to the CLS's copy
// as output.ship pieces (ship.go), which the CLS's follower reads as a
// local placeholder's file. What goes is what the reports would ship
// anyway, only sooner: no byte twice, no request for a file that did not
// grow, one request a piece however many jobs' output it holds.
const (
	liveEvery   = 250 * time.Millisecond
	liveChunk   = 64 << 10
	liveBudget  = 256 << 10
	liveTimeout = 10 * time.Second // one chunk's request; the next tick tries again

	streamLiveEvery = 500 * time.Millisecond
)

// liveOut is what live shipping has sent of one attempt's output.
type liveOut struct {
	followed atomic.Bool // someone follows it: ship while it runs

	mu   sync.Mutex // held while a chunk is in flight
	off  [2]int64   // bytes of stdout, stderr the CLS has
	done bool       // the job ended, or the CLS refused a chunk: no more
}

// setFollowed marks the running attempts someone follows, as the last
// heartbeat's reply listed them, and unmarks the others. An attempt
// followed anew wakes the shipper at once: a follower waits a heartbeat
// already.
func (a *Agent) setFollowed(refs []protocol.JobRef) {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	anew := false
	for _, p := range a.running {
		f := slices.Contains(refs, p.ref)
		if f && !p.live.followed.Load() {
			anew = true
		}
		p.live.followed.Store(f)
	}
	if anew {
		select {
		case a.liveKick <- struct{}{}:
		default:
		}
	}
}

// finish ends live shipping of an attempt, after the chunk in flight if
// any, and says where staging goes on from.
func (l *liveOut) finish() [2]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	return l.off
}

var liveStreams = [2]string{"stdout", "stderr"}

// shipLive ships running jobs' output until ctx ends (see above).
func (a *Agent) shipLive(ctx context.Context) {
	t := time.NewTicker(liveEvery)
	defer t.Stop()
	buf := make([]byte, liveChunk)
	// The stream files' growth goes every streamLiveEvery: counted in
	// ticks, as a clock read after a ship would skip a tick each time.
	streamTicks := max(int(streamLiveEvery/liveEvery), 1)
	streamed := -streamTicks // the turn it last went
	for turn := 0; ; turn++ {
		kicked := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.liveKick:
			kicked = true
		}
		ps := a.followed()
		if len(ps) == 0 {
			continue
		}
		if a.streams != nil && (kicked || turn-streamed >= streamTicks) {
			a.shipGrowth(ctx)
			streamed = turn
		}
		if kicked {
			continue // per-job files go at the ticks alone: liveBudget a tick
		}
		// Each job gets an equal share; the first in line changes every
		// tick, so that no job waits behind the others for long.
		share := min(liveChunk, max(liveBudget/(2*len(ps)), 4<<10))
		budget := liveBudget
		for i := range ps {
			if budget <= 0 || ctx.Err() != nil {
				break
			}
			budget -= a.shipSome(ctx, ps[(turn+i)%len(ps)], buf[:share])
		}
	}
}

// shipGrowth ships what each of the agent's stream files grew by since
// its last piece, while someone follows one of its jobs (the followed
// job's output is in one of them; the rest would go with the next
// reports). A file written under an earlier placeholder id cannot be
// shipped any more (the CLS takes a file from its own placeholder only);
// a piece that fails goes at the next turn, or with the reports.
func (a *Agent) shipGrowth(ctx context.Context) {
	s, id := a.streams, a.ID()
	s.filesMu.Lock()
	files := slices.Clone(s.files)
	s.filesMu.Unlock()
	for _, f := range files {
		if f.owner != id || ctx.Err() != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, liveTimeout)
		err := a.shipTo(cctx, f, f.w.Size())
		cancel()
		if err != nil {
			a.log.Debug("could not ship a followed job's stream file; the next turn tries again", "file", f.name, "err", err)
		}
	}
}

// followed lists the running jobs someone follows.
func (a *Agent) followed() []*proc {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	var ps []*proc
	for _, p := range a.running {
		if p.live.followed.Load() {
			ps = append(ps, p)
		}
	}
	return ps
}

// shipSome sends what a job wrote since the last time, at most len(buf)
// of each stream, and says how many bytes went. A chunk the connection
// loses is sent again next time, from the same offset; one the CLS refuses
// (the attempt is no longer this placeholder's) ends live shipping of it.
func (a *Agent) shipSome(ctx context.Context, p *proc, buf []byte) (sent int) {
	l := &p.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return 0
	}
	outPath, errPath := job.OutputPaths(a.cfg.OutDir, p.ref.ID, p.ref.Attempt)
	for i, path := range [2]string{outPath, errPath} {
		off := l.off[i]
		if off >= protocol.MaxStaged {
			continue // the stage at the end adds the note saying where the rest is
		}
		n := a.readAtWithin(path, buf[:min(int64(len(buf)), protocol.MaxStaged-off)], off)
		if n == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, liveTimeout)
		err := call(cctx, a, protocol.OpOutput, func(id int64) protocol.OutputChunk {
			return protocol.OutputChunk{Placeholder: id, ID: p.ref.ID, Attempt: p.ref.Attempt, Stream: liveStreams[i], Offset: off, Data: buf[:n]}
		}, nil)
		cancel()
		if err != nil {
			var pe *protocol.Error
			if errors.As(err, &pe) {
				l.done = true
				a.log.Debug("live output refused; the rest is staged when the job ends", "job", p.ref.ID, "err", err)
			}
			return sent
		}
		l.off[i] += int64(n)
		sent += n
	}
	return sent
}

// readAtWithin is readAt with a deadline (hangs.go): l.mu is held, and
// the job's report waits for it (liveOut.finish). The read goes into a
// buffer of its own, which one that does not return may fill later.
func (a *Agent) readAtWithin(path string, buf []byte, off int64) int {
	b, _ := hung.Value(a.fsWait, "read", func() ([]byte, error) {
		own := make([]byte, len(buf))
		return own[:readAt(path, own, off)], nil
	})
	return copy(buf, b)
}

// readAt reads what it can of the file at path from off into buf; an
// absent file (nothing written yet) or an error reads nothing: the stage
// at the job's end says what could not be copied.
func readAt(path string, buf []byte, off int64) int {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	n, err := f.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return 0
	}
	return n
}
