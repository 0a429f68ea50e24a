package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EnvTimeLimit is the job environment's name that carries mqsub --time
// (JobSpec.Time): seconds after which the agent kills the job, which then
// fails with TimeLimitReason. It travels as -o and -e do (EnvStdout).
const EnvTimeLimit = "MQ_TIME_LIMIT"

// foldTime moves a spec's Time into its environment and makes it the
// estimate when the spec gives none: a limit is what sbatch users give
// for a job's length, and walltime fit needs one.
func foldTime(js *JobSpec) error {
	if js.Time == 0 {
		return nil
	}
	if !(js.Time > 0 && js.Time <= MaxSeconds) {
		return fmt.Errorf("time limit %v must be more than 0 and at most %g seconds", js.Time, float64(MaxSeconds))
	}
	if js.Env == nil {
		js.Env = map[string]string{}
	}
	js.Env[EnvTimeLimit] = strconv.FormatFloat(js.Time, 'f', -1, 64)
	if js.Est == 0 {
		js.Est = js.Time
	}
	js.Time = 0
	return nil
}

// TimeLimit is the job's --time in seconds from its environment
// (NAME=VALUE), 0 for none.
func TimeLimit(env []string) float64 {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, EnvTimeLimit+"="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f <= MaxSeconds {
				return f
			}
		}
	}
	return 0
}

// TimeLimitReason is why a job killed at its --time of secs failed.
func TimeLimitReason(secs float64) string {
	return "time limit: killed after " + Duration(secs).Round(time.Millisecond).String() + " (mqsub --time)"
}

func checkTimeLimitEnv(v string) error {
	if f, err := strconv.ParseFloat(v, 64); err != nil || !(f > 0 && f <= MaxSeconds) {
		return fmt.Errorf("%s=%s is not seconds more than 0", EnvTimeLimit, v)
	}
	return nil
}

// WalltimeReason is why a job was stopped when its placeholder reached
// the end of the time it takes work for (walltime, the agent's part of
// the site's --walltime), before the batch system would kill both: an
// interruption (IsInterrupted), so the job runs again while attempts
// remain; the words say what lets it go only to placeholders with the
// time it needs.
func WalltimeReason(walltime time.Duration) string {
	return walltimeStop + " (" + walltime.Round(time.Second).String() +
		" for jobs, the site's --walltime less a margin); give the job an estimate (mqsub --est) or --time, and placeholders without that much time left do not take it"
}

// walltimeStop is how WalltimeReason begins.
const walltimeStop = ReasonInterrupted + ": its placeholder reached the end of its walltime"

// WalltimeStopped reports whether a report's reason says its attempt was
// stopped because its placeholder reached its walltime (WalltimeReason),
// and that walltime.
func WalltimeStopped(reason string) (time.Duration, bool) {
	rest, ok := strings.CutPrefix(reason, walltimeStop+" (")
	if !ok {
		return 0, false
	}
	d, _, _ := strings.Cut(rest, " ")
	if w, err := time.ParseDuration(d); err == nil && w > 0 {
		return w, true
	}
	return 0, false
}

// IsInterrupted reports whether a report's reason says its attempt was
// stopped with its placeholder, not for anything of its own: the bare
// ReasonInterrupted, or one with the words of WalltimeReason.
func IsInterrupted(reason string) bool {
	return reason == ReasonInterrupted || strings.HasPrefix(reason, ReasonInterrupted+": ")
}

// ReasonDiskFull begins the reason of a job stopped because the free space
// on its placeholder's output disk fell below the output reserve (cls
// serve --output-reserve) while its own output was less than the
// reserve: something else filled the disk. It is an interruption
// (IsInterrupted), and more (DiskFull): the attempt is not counted, and
// the job runs again once a placeholder has room.
const ReasonDiskFull = ReasonInterrupted + ": the output disk of its placeholder is nearly full"

// DiskFull reports whether a report's reason says its attempt was stopped
// for a disk others filled (ReasonDiskFull).
func DiskFull(reason string) bool {
	return reason == ReasonDiskFull || strings.HasPrefix(reason, ReasonDiskFull+" ")
}

// ReasonCLSStopped is the reason of a job a local placeholder stopped
// because the CLS that started it was stopping (cls stop, SIGTERM to cls
// serve): the user's doing, not the job's. It is an interruption
// (IsInterrupted) that is not counted (Uncounted): a job runs again after
// any number of CLS restarts.
const ReasonCLSStopped = ReasonInterrupted + ": the CLS stopped its placeholder"

// Uncounted reports whether a report's reason says its attempt was stopped
// for what is neither the job's doing nor a loss of its placeholder: a
// disk others filled (DiskFull) or the CLS stopping (ReasonCLSStopped).
// Such an attempt is recorded and not counted within max-attempts.
func Uncounted(reason string) bool {
	return DiskFull(reason) || reason == ReasonCLSStopped || strings.HasPrefix(reason, ReasonCLSStopped+";")
}
