// Package memhog is a child process for memory tests: a test binary's
// TestHelperMemHog calls Run, and a test runs that binary with
// -test.run=^TestHelperMemHog$ as the process whose memory is limited.
package memhog

import (
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// Run returns at once unless MQ_TEST_HOG_MIB is set. Then it grows its
// resident memory by 8 MiB steps up to that many MiB, sleeps a minute and
// exits; with MQ_TEST_HOG_TERM=ignore it ignores SIGTERM.
func Run() {
	n, err := strconv.Atoi(os.Getenv("MQ_TEST_HOG_MIB"))
	if err != nil {
		return
	}
	if os.Getenv("MQ_TEST_HOG_TERM") == "ignore" {
		signal.Ignore(syscall.SIGTERM)
	}
	var keep [][]byte
	for len(keep)*8 < n {
		b := make([]byte, 8<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // touch every page: resident, not just reserved
		}
		keep = append(keep, b)
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Minute)
	_ = keep
	os.Exit(0)
}
