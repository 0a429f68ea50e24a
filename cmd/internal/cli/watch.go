package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/progressview"
	"github.com/mq-hpc/mq/cmd/internal/watch"
	"github.com/mq-hpc/mq/protocol"
)

// watchView shows view every interval until the command is interrupted
// (watch.Loop), under a header naming the command line.
func watchView(c *cli.Context, every time.Duration, view func(w io.Writer, limit int) error) error {
	header := fmt.Sprintf("every %s: %s", every, strings.Join(os.Args, " "))
	if len(os.Args) == 0 || c.App.Writer != os.Stdout {
		header = fmt.Sprintf("every %s", every)
	}
	return watch.Loop(c.Context, c.App.Writer, progressview.IsTerminal(c.App.Writer), every, header, c.Int("limit"), view)
}

// filteredSummary narrows a summary to -q's queue, or with -t to the
// target's jobs (in -q's queue, if given), counted by the CLS.
func filteredSummary(c *cli.Context, cl *client.Client, qs []protocol.QueueCounts) ([]protocol.QueueCounts, error) {
	if p := c.String("target-prefix"); p != "" {
		return prefixSummary(c, cl, p)
	}
	if !c.IsSet("t") {
		for _, q := range qs {
			if q.Queue == c.String("q") {
				return []protocol.QueueCounts{q}, nil
			}
		}
		return nil, protocol.Errorf(protocol.CodeNotFound, "queue %s does not exist", c.String("q"))
	}
	var row protocol.QueueCounts
	err := client.Stream(c.Context, cl, protocol.OpProgress, protocol.Progress{Queue: c.String("q"), Target: c.String("t"), Once: true, Spending: true}, func(r protocol.ProgressReply) error {
		row = protocol.QueueCounts{Queue: c.String("q"), Target: c.String("t"), Counts: r.Counts, Spent: r.Spent, SpentBySite: r.SpentBySite}
		return nil
	})
	if row.Queue == "" {
		row.Queue = "all"
	}
	return []protocol.QueueCounts{row}, err
}

// prefixSummary is --summary --target-prefix P: the states of the jobs
// whose target starts with P (a workflow run's, as Snakemake's mq-status
// lists them), counted from a listing, as the CLS keeps counts per queue
// and target only.
func prefixSummary(c *cli.Context, cl *client.Client, prefix string) ([]protocol.QueueCounts, error) {
	row := protocol.QueueCounts{Queue: c.String("q"), Target: prefix + "*", Counts: map[string]int{}}
	st := protocol.Stat{Queue: row.Queue, Target: c.String("t"), TargetPrefix: prefix, States: "WQHPEDFBX"}
	if st.Target != "" { // both, as a listing takes them
		row.Target = st.Target
	}
	err := client.Stream(c.Context, cl, protocol.OpStat, st, func(r protocol.StatReply) error {
		for _, j := range r.Jobs {
			row.Counts[j.State]++
		}
		return nil
	})
	if row.Queue == "" {
		row.Queue = "all"
	}
	return []protocol.QueueCounts{row}, err
}
