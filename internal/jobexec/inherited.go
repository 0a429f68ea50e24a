package jobexec

import (
	"os"
	"strconv"
	"syscall"
)

// KeepInherited marks every descriptor this process has beyond stdin,
// stdout and stderr close-on-exec, so that no job it starts inherits one.
// Go opens its own descriptors so; those without the flag are the ones
// the process inherited: whatever started the agent left open (a lock
// flock(1) holds, a pipe of the script or batch system that started it,
// a file a root process opened before runuser dropped to the user), which
// every job would otherwise hold for as long as it runs, and write to.
// An agent calls it once, before its first job.
func KeepInherited() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		ents, _ = os.ReadDir("/dev/fd") // where there is no /proc
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
