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
// die), a few passes at most, and returns how many it killed, each once
// (one signalled in a pass may not have died by the next on a loaded
// machine: it is not looked at again).
func KillEscaped(proc, name, value string) int {
	return KillTagged(proc, name, func(v string) bool { return v == value })
}

// KillTagged is KillEscaped for every value of name that match accepts:
// one pass over proc for the escaped processes of many attempts.
func KillTagged(proc, name string, match func(value string) bool) int {
	key := []byte("\x00" + name + "=")
	killed := 0
	// A process killed in a pass may not have exited by the next, its
	// environment still readable: it is neither counted nor looked at
	// again (its pid cannot have been reused that soon).
	done := map[int]bool{}
	for range 5 {
		n := 0
		ents, err := os.ReadDir(proc)
		if err != nil {
			return killed
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() || done[pid] {
				continue
			}
			if killIfTagged(proc, pid, key, match) {
				done[pid] = true
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

// killIfTagged kills pid if its environment gives the variable key
// ("\x00name=") a value match accepts, wherever it stands (the first
// variable given a NUL in front).
func killIfTagged(proc string, pid int, key []byte, match func(string) bool) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false // gone, or a kernel without pidfds (before 5.3)
	}
	defer unix.Close(fd)
	env, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "environ"))
	if err != nil || !tagged(append([]byte{0}, env...), key, match) {
		return false // another user's, or not the attempt's
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}

// tagged reports whether env (NUL-separated, a NUL in front) sets key to
// a value match accepts.
func tagged(env, key []byte, match func(string) bool) bool {
	for {
		i := bytes.Index(env, key)
		if i < 0 {
			return false
		}
		env = env[i+len(key):]
		v := env
		if j := bytes.IndexByte(v, 0); j >= 0 {
			v = v[:j]
		}
		if match(string(v)) {
			return true
		}
	}
}
