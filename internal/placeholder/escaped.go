package placeholder

import (
	"strconv"

	"github.com/mq-hpc/mq/internal/jobexec"
	"github.com/mq-hpc/mq/protocol"
)

// attemptVar names the variable each attempt's processes inherit: an id
// of the attempt unique on its host (Agent.attemptID), which killEscaped
// finds its processes by. A job may not set it, and mqsub -V does not
// pass it on to the jobs a job submits.
const attemptVar = protocol.EnvAttemptID

// attemptID is the value of attemptVar for attempt of job id: the agent's
// random lineage, then the job and attempt.
func (a *Agent) attemptID(id int64, attempt int) string {
	return a.lineage + "." + strconv.FormatInt(id, 10) + "." + strconv.Itoa(attempt)
}

// killEscaped kills the processes attempt id left outside its process
// group (jobexec.KillEscaped), and says how many.
func killEscaped(proc, id string) int { return jobexec.KillEscaped(proc, attemptVar, id) }
