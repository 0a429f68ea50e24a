package placeholder

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/protocol"
)

// A write of a job's output refused for want of room (diskroom.Refused:
// a quota statfs does not show, or a disk filled before the reserve was
// looked at) lost the output and the job ended done all the same; the
// placeholder took the next, and a queue ran in seconds with no output.
// Such an attempt is stopped and runs again, as one stopped for the
// output reserve, and the agent takes no new jobs until a small write
// where the refused one was goes through (Agent.room, refusedDir,
// workLoop.diskFull).

// roomOwn is the least output an attempt refused for want of room must
// have written to be the cause itself (and fail) when the output reserve
// is smaller: a quota's size is not known.
const roomOwn = 64 << 20

// noteNoRoom pauses the agent if err is a write refused for want of room.
func (a *Agent) noteNoRoom(err error) { a.room.Lost(err, time.Now()) }

// refusedDir is where a paused agent tries a write again: beside the file
// refused (a job's -o file may be on another filesystem, under another
// quota, than the output directory), else in the output directory.
func (a *Agent) refusedDir(refused error) string {
	var pe *fs.PathError
	if errors.As(refused, &pe) && filepath.IsAbs(pe.Path) {
		return filepath.Dir(pe.Path)
	}
	return a.cfg.OutDir
}

// refused stops the attempt for a write of its output refused for want
// of room (other errors lose the output, not the job), and pauses the
// agent.
func (l *outputLimit) refused(err error) {
	if !diskroom.Refused(err) {
		return
	}
	l.mu.Lock()
	if l.reason == "" {
		l.full, l.roomErr = true, err
		l.stop(fmt.Sprintf("output: writing it in %s failed: %s; the job was stopped", l.dir, diskroom.Why(err)))
	}
	l.mu.Unlock()
	if l.noRoom != nil {
		l.noRoom(err)
	}
}

// roomRefused is othersFilled's reason for an attempt stopped by a
// refused write; l.mu is held.
func (l *outputLimit) roomRefused() string {
	if l.written >= max(l.reserve, roomOwn) {
		return ""
	}
	return fmt.Sprintf("%s (writing its output in %s failed: %s; the job wrote %d): it runs again once there is room",
		protocol.ReasonDiskFull, l.dir, diskroom.Why(l.roomErr), l.written)
}

// startRefused ends an attempt that could not start for want of room for
// a file it needs: it runs again, and the agent pauses meanwhile.
func (a *Agent) startRefused(t *attempt, err error) bool {
	a.noteNoRoom(err)
	t.rep.Exit, t.rep.Finished = 127, t.ended()
	t.rep.Reason = protocol.ClipText(fmt.Sprintf("%s (could not start: %v): it runs again once there is room", protocol.ReasonDiskFull, err), protocol.MaxReasonBytes)
	return false
}
