//go:build !linux

package jobexec

// AwaitExit returns at once where there are no pidfds: exec.Cmd.Wait
// blocks instead.
func AwaitExit(pidfd int) (exited bool) { return false }
