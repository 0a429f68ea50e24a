package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/vbauerster/cupwriter"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// watchArgs turns "--watch INTERVAL" into "--watch --interval=INTERVAL"
// when the word after --watch is an interval: seconds (2, 0.5) or a Go
// duration (500ms, 1m). Anything else after --watch is left alone.
func watchArgs(args []string) []string {
	out := make([]string, 0, len(args)+1)
	for i := 0; i < len(args); i++ {
		out = append(out, args[i])
		if args[i] == "--" {
			return append(out, args[i+1:]...)
		}
		if (args[i] == "--watch" || args[i] == "-watch") && i+1 < len(args) {
			if d, ok := interval(args[i+1]); ok {
				out = append(out, "--interval="+d.String())
				i++
			}
		}
	}
	return out
}

func interval(s string) (time.Duration, bool) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1e6 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// watchView shows view every interval until the command is interrupted:
// on a terminal redrawn in place (cupwriter moves the cursor back over the
// last view; no escape codes of ours) and cut to the terminal's height, else
// one view after another, each under a header line.
func watchView(c *cli.Context, every time.Duration, view func(w io.Writer, limit int) error) error {
	var cw *cupwriter.Writer
	if f, ok := c.App.Writer.(*os.File); ok && isTerminal(f) {
		cw = cupwriter.New(f, false)
	}
	header := fmt.Sprintf("every %s: %s", every, strings.Join(os.Args, " "))
	if len(os.Args) == 0 || c.App.Writer != os.Stdout {
		header = fmt.Sprintf("every %s", every)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		now := time.Now().Format("15:04:05")
		if cw != nil {
			_, height, err := cw.GetTermSize()
			if err != nil || height < 4 {
				height = 24
			}
			var buf bytes.Buffer
			fmt.Fprintf(&buf, "%s  %s\n", protocol.Printable(protocol.ClipText(header, 200)), now)
			limit := height - 3
			if c.Int("limit") > 0 {
				limit = min(limit, c.Int("limit"))
			}
			if err := view(&buf, limit); err != nil {
				return err
			}
			lines := strings.SplitAfter(buf.String(), "\n")
			if lines[len(lines)-1] == "" {
				lines = lines[:len(lines)-1]
			}
			if len(lines) > height-1 {
				lines = lines[:height-1]
			}
			for _, l := range lines {
				cw.WriteString(l)
			}
			if err := cw.Flush(len(lines)); err != nil {
				return err
			}
		} else {
			w := bufio.NewWriter(c.App.Writer)
			fmt.Fprintf(w, "%s  %s\n", header, now)
			if err := view(w, c.Int("limit")); err != nil {
				return err
			}
			fmt.Fprintln(w)
			if err := w.Flush(); err != nil {
				return err
			}
		}
		select {
		case <-c.Context.Done():
			return nil
		case <-tick.C:
		}
	}
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
