package protocol

import "fmt"

// MaxStarted bounds a message's Started list: a placeholder starts at
// most one job per free slot between two messages (Next.Free's bound).
const MaxStarted = 4096

// CheckStarted checks a Started list: a job handed out ahead of a free
// slot (Next.Ahead, Assignment.Ahead) is Executing but shown prefetched
// (P) until its placeholder says it started it, on a message it sends
// anyway (Next, ReportBatch, Heartbeat), never one of its own. A report
// of the attempt says it too.
func CheckStarted(refs []JobRef) error {
	if len(refs) > MaxStarted {
		return fmt.Errorf("started lists %d jobs, at most %d", len(refs), MaxStarted)
	}
	return nil
}
