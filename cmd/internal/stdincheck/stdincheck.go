// Package stdincheck says whether mqsub's stdin holds data a job would
// lose: mq runs a job later, elsewhere, with /dev/null as its stdin.
package stdincheck

import (
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// stdinWait is how long mqsub waits for a pipe on its stdin to show data
// or its end. A pipe still open and empty after it is taken as nobody's
// input (a program that starts mqsub with a pipe it never writes, as
// daemons and CI runners do): refusing it would fail every such call.
const stdinWait = 200 * time.Millisecond

// Refusal is why mqsub TARGET COMMAND refuses its stdin ("" if it
// need not): mq runs the job later and elsewhere and gives it /dev/null,
// so data piped or redirected to mqsub would be dropped silently. A
// terminal or a character device (/dev/null) is nobody's input; a
// regular file at its end (a redirection fully read) or a pipe at its
// end gives nothing; a regular file read part way is a loop's input
// ("while read f; do mqsub ...; done < list": the shell's read leaves the
// offset after the line), not the job's. Over SSH (another reader) only
// data is refused.
func Refusal(r io.Reader) string {
	const fix = "mq does not give a job mqsub's stdin: put the data in a file the command redirects (mqsub T 'CMD < FILE'), or run mqsub < /dev/null (in a while-read loop, too)"
	switch r := r.(type) {
	case nil:
		return ""
	case interface{ Len() int }: // an in-memory reader: what tests give
		if r.Len() > 0 {
			return "stdin has data; " + fix
		}
		return ""
	case *os.File:
		return fileRefusal(r, fix)
	}
	return streamRefusal(r, fix)
}

// fileRefusal is Refusal for a file descriptor.
func fileRefusal(r *os.File, fix string) string {
	fi, err := r.Stat()
	if err != nil {
		return ""
	}
	switch m := fi.Mode(); {
	case m&os.ModeCharDevice != 0:
		return ""
	case m.IsRegular():
		off, err := r.Seek(0, io.SeekCurrent)
		if err == nil && off == 0 && fi.Size() > 0 {
			return "stdin is a file with data; " + fix
		}
		return ""
	case m&(os.ModeNamedPipe|os.ModeSocket) != 0:
		return pipeRefusal(r, fix)
	}
	return ""
}

// streamWait is how long mqsub run in-process over SSH waits for the
// session's stdin: a client whose stdin is a terminal sends nothing and
// keeps the channel open, and must not be refused (nor wait long).
const streamWait = 100 * time.Millisecond

// streamRefusal is Refusal for another reader (an SSH session's
// stdin): data arriving within streamWait is refused; its end, or
// nothing yet (an interactive client), is not. A byte read is not the
// job's anyway: mq gives a job no stdin.
func streamRefusal(r io.Reader, fix string) string {
	got := make(chan int, 1)
	go func() {
		var b [1]byte
		n, _ := r.Read(b[:])
		got <- n
	}()
	select {
	case n := <-got:
		if n > 0 {
			return "stdin has data; " + fix
		}
	case <-time.After(streamWait):
	}
	return ""
}

// pipeRefusal waits up to stdinWait for pipe f to be readable: data is
// refused; its end (the writer closed, nothing written), or nothing yet,
// is not. It reads nothing: the data may be a loop's ("producer | while
// read s; do mqsub ...; done"), and a byte taken would be the next line's.
func pipeRefusal(f *os.File, fix string) string {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
	deadline := time.Now().Add(stdinWait)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline)/time.Millisecond))
		if errors.Is(err, unix.EINTR) && time.Now().Before(deadline) {
			continue
		}
		switch {
		case err != nil:
			return ""
		case n == 0:
			return "" // still open, nothing written: nobody's input
		case fds[0].Revents&unix.POLLIN != 0:
			// Readable: data, or (on some systems) the end with POLLIN.
			// FIONREAD (Linux's TIOCINQ) counts the bytes waiting
			// without taking them; where it fails, Linux's poll, which
			// sets POLLIN only for data, is believed.
			if k, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ); err == nil && k == 0 {
				return ""
			}
			return "stdin has data; " + fix
		}
		return "" // POLLHUP alone: the writer closed, nothing written
	}
}
