package jobexec

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// KillEscaped kills, with SIGKILL, every process of this user whose
// environment holds name=value: the processes an attempt left outside
// its process group (setsid, a daemon's double fork), which the group kill
// does not reach. They are found by the variable they inherited, as
// HTCondor finds a job's escaped processes. Each is opened as a pidfd
// before its environment is read, so a pid reused meanwhile is never
// signalled. It looks again while a pass finds some (they may fork as they
// die), a few passes at most, and returns how many it killed: each
// once, though a process signalled in one pass may not have died by the
// next (a loaded machine), which finds and signals it again.
func KillEscaped(proc, name, value string) int {
	want := []byte("\x00" + name + "=" + value + "\x00")
	killed := 0
	signalled := map[int]bool{}
	for range 5 {
		n := 0
		ents, err := os.ReadDir(proc)
		if err != nil {
			return killed
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			if killIfTagged(proc, pid, want) && !signalled[pid] {
				signalled[pid] = true
				n++
			}
		}
		killed += n
		if n == 0 {
			break
		}
	}
	return killed
}

// killIfTagged kills pid if its environment holds want (NUL-delimited on
// both sides, the first variable given one in front).
func killIfTagged(proc string, pid int, want []byte) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false // gone, or a kernel without pidfds (before 5.3)
	}
	defer unix.Close(fd)
	env, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "environ"))
	if err != nil || !bytes.Contains(append([]byte{0}, env...), want) {
		return false // another user's, or not the attempt's
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}
