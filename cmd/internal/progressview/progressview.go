// Package progressview shows how far a set of jobs has got, as mqsub -b
// and mqwait follow it: a bar on a terminal, a line per change
// otherwise, and at the end which jobs did not end done.
package progressview

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/rewait"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// IsTerminal reports whether w is a terminal with a width (a pseudo-
// terminal nobody sized is 0 columns wide: no bar fits).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false
	}
	width, _, err := term.GetSize(int(f.Fd()))
	return err == nil && width > 0
}

// A View shows a progress stream: a bar (mpb) on a terminal, or a
// plain line per change otherwise. Rate and ETA count the jobs that ended
// while it watched.
type View struct {
	Out   io.Writer
	TTY   bool
	Plain bool // print lines when not a terminal (else nothing)

	mu      sync.Mutex
	last    protocol.ProgressReply
	start   time.Time
	ended0  int
	started bool
	line    string

	p   *mpb.Progress
	bar *mpb.Bar
}

func ended(r protocol.ProgressReply) int {
	return r.Total - r.Counts["W"] - r.Counts["Q"] - r.Counts["H"] - r.Counts["P"] - r.Counts["E"]
}

// rate returns jobs ended per second since the view started and the
// expected time left (0 when unknown).
func (v *View) rate(now time.Time) (float64, time.Duration) {
	el := now.Sub(v.start).Seconds()
	n := ended(v.last) - v.ended0
	if el <= 0 || n <= 0 {
		return 0, 0
	}
	r := float64(n) / el
	left := v.last.Total - ended(v.last)
	return r, time.Duration(float64(left) / r * float64(time.Second)).Round(time.Second)
}

// countsText says how many jobs are in each state, e.g. "3 done, 1 failed,
// 2 executing".
func countsText(r protocol.ProgressReply) string {
	var parts []string
	for _, st := range []job.State{job.Done, job.Failed, job.Blocked, job.Deleted, job.Executing, job.Prefetched, job.Queued, job.Held, job.Waiting} {
		if n := r.Counts[st.String()]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st.Name()))
		}
	}
	if len(parts) == 0 {
		return "no jobs"
	}
	return strings.Join(parts, ", ")
}

func (v *View) rateText(now time.Time) string {
	r, eta := v.rate(now)
	if r == 0 {
		if v.last.Total == ended(v.last) {
			return ""
		}
		return "-/s, ETA -"
	}
	if v.last.Total == ended(v.last) {
		return fmt.Sprintf("%.1f/s", r)
	}
	return fmt.Sprintf("%.1f/s, ETA %s", r, eta)
}

func (v *View) update(r protocol.ProgressReply) {
	v.mu.Lock()
	now := time.Now()
	if !v.started {
		v.started, v.start, v.ended0 = true, now, ended(r)
	}
	v.last = r
	v.mu.Unlock()
	switch {
	case v.TTY:
		if v.bar == nil {
			v.p = mpb.New(mpb.WithOutput(v.Out), mpb.WithWidth(30), mpb.WithRefreshRate(200*time.Millisecond))
			v.bar = v.p.New(int64(max(r.Total, 1)), mpb.BarStyle(),
				mpb.PrependDecorators(decor.Any(func(decor.Statistics) string {
					v.mu.Lock()
					defer v.mu.Unlock()
					return fmt.Sprintf("%d/%d", ended(v.last), v.last.Total)
				})),
				mpb.AppendDecorators(decor.Percentage(decor.WCSyncSpace), decor.Any(func(decor.Statistics) string {
					v.mu.Lock()
					defer v.mu.Unlock()
					return " " + strings.TrimSpace(v.rateText(time.Now())+"  "+countsText(v.last))
				})))
		}
		v.bar.SetTotal(int64(max(r.Total, 1)), false)
		v.bar.SetCurrent(int64(ended(r)))
		if r.Ended {
			v.bar.SetTotal(-1, true)
			v.p.Wait()
		}
	case v.Plain:
		v.mu.Lock()
		line := fmt.Sprintf("%d/%d ended: %s", ended(r), r.Total, countsText(r))
		if line != v.line || r.Ended {
			v.line = line // before the rate, which changes every time
			if rt := v.rateText(now); rt != "" {
				line += "; " + rt
			}
			fmt.Fprintln(v.Out, line)
		}
		v.mu.Unlock()
	}
}

// stop ends the bar early (a timeout, an interrupt, an error).
func (v *View) stop() {
	if v.bar != nil && !v.bar.Completed() {
		v.bar.Abort(false)
		v.p.Wait()
	}
}

// Follow streams the progress of req, shows it on v, and returns the
// last frame; timeout 0 means none.
func Follow(ctx context.Context, cl *client.Client, rw rewait.Waiter, req protocol.Progress, v *View, timeout time.Duration) (protocol.ProgressReply, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var last protocol.ProgressReply
	err := rw.Wait(ctx, cl, func(cl *client.Client) error {
		return client.Stream(ctx, cl, protocol.OpProgress, req, func(r protocol.ProgressReply) error {
			last = r
			v.update(r)
			return nil
		})
	})
	if err != nil || !last.Ended {
		v.stop()
	}
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		return last, fmt.Errorf("timed out after %s with %d of %d jobs not ended (%s)", timeout, last.Total-ended(last), last.Total, countsText(last))
	}
	return last, err
}

// NotDone names the jobs that did not end done, a line each after a
// count ("" if all did).
func NotDone(r protocol.ProgressReply) string {
	if len(r.NotDone) == 0 {
		return ""
	}
	n := len(r.NotDone) + r.MoreNotDone
	lines := []string{fmt.Sprintf("%d of %d jobs did not end done:", n, r.Total)}
	for _, e := range r.NotDone {
		lines = append(lines, "  "+endText(e))
	}
	if r.MoreNotDone > 0 {
		lines = append(lines, fmt.Sprintf("  and %d more (mqstat -s %s)", r.MoreNotDone, notDoneStates(r)))
	}
	return strings.Join(lines, "\n")
}

// notDoneStates is the letters of the ended states other than done that
// r counts jobs in (failed, blocked, deleted), for mqstat -s: all three
// when r has no counts.
func notDoneStates(r protocol.ProgressReply) string {
	var b strings.Builder
	for _, s := range []job.State{job.Failed, job.Blocked, job.Deleted} {
		if r.Counts[string(rune(s))] > 0 {
			b.WriteByte(byte(s))
		}
	}
	if b.Len() == 0 {
		return "FBX"
	}
	return b.String()
}

// endText says how a job ended, on one line.
func endText(e protocol.JobEnd) string {
	s := fmt.Sprintf("job %d %s", e.ID, job.State(e.State[0]).Name())
	if e.Exit != nil && *e.Exit != 0 {
		s += fmt.Sprintf(" (exit %d)", *e.Exit)
	}
	if e.Reason != "" {
		s += ": " + protocol.ClipText(e.Reason, 200)
	}
	return s
}
