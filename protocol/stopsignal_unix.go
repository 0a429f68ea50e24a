//go:build unix

package protocol

import "syscall"

// CLSStopSignal is what a CLS that is stopping sends the local
// placeholders it started: they stop their jobs, as on SIGTERM, and report
// them ReasonCLSStopped. (An agent that does not catch it ignores it, as
// Go programs do SIGUSR2: the CLS kills it after its grace.)
const CLSStopSignal = syscall.SIGUSR2
