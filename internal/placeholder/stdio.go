package placeholder

import (
	"io"
	"os"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// teeCloser writes to the attempt's own output and to a user file.
type teeCloser struct {
	io.WriteCloser
	also io.Writer
}

func (t teeCloser) Write(p []byte) (int, error) {
	n, err := t.WriteCloser.Write(p)
	t.also.Write(p[:n]) // never fails: userFile keeps its error
	return n, err
}

// onlyReader hides a reader's WriterTo, so io.CopyBuffer goes through
// the limited writer's Write.
type onlyReader struct{ io.Reader }

// createOutput creates a job's output file.
func createOutput(path string) (io.WriteCloser, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600) // never write through a link
}

// joinLost adds one cause of lost output to the others.
func joinLost(lost, why string) string {
	switch {
	case lost == "":
		return why
	case why == "":
		return lost
	}
	return lost + "; " + why
}

// runLimit is how long the attempt may run and the reason it is killed
// with after that: its queue's ceiling or its own --time, whichever is
// sooner (0: no limit).
func runLimit(asg protocol.Assignment) (time.Duration, string) {
	c, lim := asg.Ceiling, protocol.TimeLimit(asg.Env)
	if lim > 0 && (c <= 0 || lim < c) {
		return protocol.Duration(lim), protocol.TimeLimitReason(lim)
	}
	return protocol.Duration(c), protocol.ReasonCeiling
}
