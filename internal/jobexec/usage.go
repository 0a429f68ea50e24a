package jobexec

import (
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// UsageOf is what an ended job's process used, from its rusage: the shell
// and every descendant it waited for (wait4 adds theirs to its own).
func UsageOf(ps *os.ProcessState) protocol.Usage {
	if ps == nil {
		return protocol.Usage{}
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return protocol.Usage{}
	}
	rss := int64(ru.Maxrss)
	if runtime.GOOS != "darwin" {
		rss *= 1024 // Linux and the BSDs count KiB; macOS counts bytes
	}
	return protocol.Usage{
		CPUUser: time.Duration(ru.Utime.Nano()).Seconds(),
		CPUSys:  time.Duration(ru.Stime.Nano()).Seconds(),
		MaxRSS:  rss,
	}
}
