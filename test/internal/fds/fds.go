// Package fds keeps the end-to-end suites' children from holding what the
// suites inherited.
package fds

import (
	"os"
	"strconv"
	"syscall"
)

// CloseInherited marks every descriptor this process inherited beyond
// stdin, stdout and stderr close-on-exec. The suites run under flock(1),
// whose lock is such a descriptor: a process a suite started and left
// behind (a CLS of a killed test, munged started by scripts/slurm.sh)
// would otherwise hold the lock after the suite ended, and no later run
// could start.
func CloseInherited() {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
