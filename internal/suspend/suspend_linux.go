package suspend

import (
	"time"

	"golang.org/x/sys/unix"
)

// total is CLOCK_BOOTTIME less CLOCK_MONOTONIC: the boot clock is the
// monotonic clock plus the time suspended.
func total() time.Duration {
	var mono, boot unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono) != nil || unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot) != nil {
		return 0
	}
	return max(0, time.Duration(boot.Nano()-mono.Nano()))
}
