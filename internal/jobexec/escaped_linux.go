package jobexec

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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
	return sweeper{proc: proc, pause: func(try int) { time.Sleep(time.Millisecond << (2 * try)) }}.kill(name, match)
}

// sweeper is KillTagged's walk over proc; pause is the wait before the
// try'th look again at processes whose environment read empty (the
// tests' way in).
type sweeper struct {
	proc  string
	pause func(try int)
}

// emptyLooks is how many times more a process whose environment read
// empty is looked at in a pass, a pause apart (1, 4, 16 ms: a loaded
// machine may leave an exec half done for some milliseconds).
const emptyLooks = 3

func (s sweeper) kill(name string, match func(string) bool) int {
	key := []byte("\x00" + name + "=")
	killed := 0
	// A process killed in a pass may not have exited by the next, its
	// environment still readable: it is neither counted nor looked at
	// again (its pid cannot have been reused that soon).
	done := map[int]bool{}
	for range 5 {
		ents, err := os.ReadDir(s.proc)
		if err != nil {
			return killed
		}
		n := 0
		// lookAt looks at each of pids and returns those whose
		// environment read empty.
		lookAt := func(pids []int) (empty []int) {
			for _, pid := range pids {
				switch s.look(pid, key, match) {
				case lookKilled:
					done[pid] = true
					n++
				case lookEmpty:
					empty = append(empty, pid)
				}
			}
			return empty
		}
		pids := make([]int, 0, len(ents))
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() && !done[pid] {
				pids = append(pids, pid)
			}
		}
		// A process inside execve reads an empty environment until the
		// kernel has set the new program's up: a job's process caught
		// then would escape. Those are looked at again a moment later.
		// (A program started with no environment at all stays empty and
		// costs these pauses, 21 ms, in each pass.)
		empty := lookAt(pids)
		for try := 0; try < emptyLooks && len(empty) > 0; try++ {
			s.pause(try)
			empty = lookAt(empty)
		}
		killed += n
		if n == 0 {
			break
		}
	}
	return killed
}

// What look found of a process.
const (
	lookPassed = iota // not tagged, another user's, or gone
	lookKilled        // tagged, and signalled
	lookEmpty         // its environment read empty, and it is neither a zombie nor a kernel thread
)

// look kills pid if its environment gives the variable key
// ("\x00name=") a value match accepts, wherever it stands (the first
// variable given a NUL in front).
func (s sweeper) look(pid int, key []byte, match func(string) bool) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return lookPassed // gone, or a kernel without pidfds (before 5.3)
	}
	defer unix.Close(fd)
	dir := filepath.Join(s.proc, strconv.Itoa(pid))
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	switch {
	case err != nil:
		return lookPassed // another user's, or gone
	case len(env) == 0:
		if liveUserProcess(dir) {
			return lookEmpty
		}
		return lookPassed
	case !tagged(append([]byte{0}, env...), key, match):
		return lookPassed
	}
	if unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) != nil {
		return lookPassed
	}
	return lookKilled
}

// pfKthread is the kernel's PF_KTHREAD flag in /proc/PID/stat.
const pfKthread = 0x00200000

// liveUserProcess reports whether the process at dir (/proc/PID) is
// neither a zombie nor a kernel thread, whose environments read empty
// for good, by its stat file.
func liveUserProcess(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return false
	}
	// "pid (comm) state ppid pgrp session tty tpgid flags ...": comm may
	// hold anything, parentheses included, so the fields follow its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfKthread == 0
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
