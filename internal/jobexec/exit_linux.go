package jobexec

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// AwaitExit returns once the process behind pidfd (from
// syscall.SysProcAttr.PidFD) has exited, without reaping it, and closes
// pidfd; exec.Cmd.Wait then reaps it at once. It waits in the runtime's
// network poller instead of in Wait's blocking waitid: a thread blocked
// in a system call for a whole job keeps the Go runtime's monitor
// thread waking every 20 µs to 10 ms to take its P back, which was half
// of a placeholder's own CPU for jobs of tens of milliseconds. With no
// pidfd (-1: an old kernel) it returns at once, and Wait blocks as
// before. exited reports whether the process is known to have exited
// (and, not reaped yet, still holds its process id).
func AwaitExit(pidfd int) (exited bool) {
	if pidfd < 0 {
		return false
	}
	if err := syscall.SetNonblock(pidfd, true); err != nil {
		syscall.Close(pidfd)
		return false
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	// A pidfd polls readable once its process has exited.
	err = rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(p, 0)
		exited = err == nil && n > 0
		return exited || err != nil && err != unix.EINTR
	})
	return err == nil && exited
}
