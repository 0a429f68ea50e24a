package protocol

import (
	"fmt"
	"strings"

	"github.com/mq-hpc/mq/job"
)

// Rerun runs ended jobs again (mqsub --rerun). With a Command (or
// CommandBytes, for one that is not valid UTF-8), the one job its IDs
// name runs that command instead of its own: a failed job mended in place
// keeps its id, target and dependents, and its earlier attempts keep the
// command they ran.
type Rerun struct {
	Select
	Command      string `json:"command,omitempty"`
	CommandBytes []byte `json:"command_bytes,omitempty"`
}

// NewCommand is the command a rerun gives its job ("" when none), checked
// as a submitted command is.
func (r Rerun) NewCommand() (string, error) {
	cmd := r.Command
	if len(r.CommandBytes) > 0 {
		if cmd != "" {
			return "", fmt.Errorf("give command or command_bytes, not both")
		}
		cmd = string(r.CommandBytes)
	}
	if cmd == "" {
		return "", nil
	}
	if len(cmd) > job.MaxCommandBytes {
		return "", fmt.Errorf("command is %d bytes; the limit is %d", len(cmd), job.MaxCommandBytes)
	}
	if strings.IndexByte(cmd, 0) >= 0 {
		return "", fmt.Errorf("command contains a NUL byte")
	}
	s := r.Select
	if len(s.IDs) != 1 || s.First != 0 || s.Last != 0 || s.Queue != "" || s.Target != "" || s.States != "" || s.All {
		return "", fmt.Errorf("a rerun with a new command names one job, by its id")
	}
	return cmd, nil
}
