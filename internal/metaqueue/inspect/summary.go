package inspect

import "github.com/mq-hpc/mq/job"

// Counts is a queue's counts by state letter as the summary shows them:
// every state, H only when some job is held (a client that predates it
// sees the counts it knew).
func Counts(c *[128]int) map[string]int {
	out := make(map[string]int, len(job.States))
	for _, st := range job.States {
		if st != job.Held || c[st] > 0 {
			out[st.String()] = c[st]
		}
	}
	return out
}
