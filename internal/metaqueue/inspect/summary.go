package inspect

import "github.com/mq-hpc/mq/job"

// Counts is a queue's counts by state letter as the summary shows them,
// prefetched of its Executing jobs shown P: every state, H and P only
// when some job is in it (a client that predates them sees the counts it
// knew).
func Counts(c *[128]int, prefetched int) map[string]int {
	out := make(map[string]int, len(job.States))
	for _, st := range job.States {
		n := c[st]
		switch st {
		case job.Prefetched:
			n = prefetched
		case job.Executing:
			n -= prefetched
		}
		if (st != job.Held && st != job.Prefetched) || n > 0 {
			out[st.String()] = n
		}
	}
	return out
}
