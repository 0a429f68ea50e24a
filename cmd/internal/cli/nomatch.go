package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/jobids"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// A range or selection that matches no job is said, never silent: a
// range none of whose ids is a job is unknown ids, an error (exit 1) as
// ids named are; a selection (-q, -t, -s, --all, or a range of jobs none
// of which the command applies to) that matches nothing is a normal
// outcome, as scancel --name and squeue -n have it (exit 0), said in one
// line on stderr unless -Q. A -t or -q naming no target or queue at all
// is refused by the CLS (exit 1).

// anyJob reports whether a job (in any state, deleted too) has an id in
// first..last.
func anyJob(ctx context.Context, cl *client.Client, first, last int64) (bool, error) {
	found := false
	err := client.Stream(ctx, cl, protocol.OpStat, protocol.Stat{From: first, To: last, States: allStates, Limit: 1}, func(r protocol.StatReply) error {
		found = found || len(r.Jobs) > 0
		return nil
	})
	return found, err
}

// nothingActed follows an action (verb: "deleted") on sel that acted on
// no job and refused none: unknown ids if sel is a range no job is in,
// else a line on stderr saying what matched nothing. allowed are the
// states the action applies to.
func nothingActed(c *cli.Context, cl *client.Client, sel protocol.Select, allowed, verb string) error {
	if sel.Atomic {
		return nil // ids named: each was acted on or refused by name
	}
	if sel.First > 0 {
		// A CLS that cannot list the range leaves it a selection: the
		// action itself went well.
		if found, err := anyJob(c.Context, cl, sel.First, sel.Last); err == nil && !found {
			return exitError{code: ExitFailed, msg: "nothing " + verb + ": " + jobids.RangeUnknown(sel.First, sel.Last)}
		}
	}
	if !c.Bool("Q") {
		fmt.Fprintf(c.App.ErrWriter, "%s: nothing %s: no job%s is %s\n", c.App.Name, verb, selectionText(sel.First, sel.Last, sel.Queue, sel.Target), stateNames(allowed, sel.States))
	}
	return nil
}

// selectionText names the jobs of a range, queue and target as the
// command line did, " of 1-3 -q Q -t T", or "" for every job.
func selectionText(first, last int64, queue, target string) string {
	var parts []string
	if first > 0 {
		parts = append(parts, fmt.Sprintf("%d-%d", first, last))
	}
	if queue != "" {
		parts = append(parts, "-q "+protocol.Printable(queue))
	}
	if target != "" {
		parts = append(parts, "-t "+protocol.Printable(target))
	}
	if len(parts) == 0 {
		return ""
	}
	return " of " + strings.Join(parts, " ")
}

// stateNames names the states of allowed that states (-s, all if "")
// keeps: "waiting, queued or held".
func stateNames(allowed, states string) string {
	var names []string
	for _, s := range allowed {
		if states == "" || strings.ContainsRune(states, s) || s == 'E' && strings.ContainsRune(states, 'P') {
			names = append(names, job.State(s).Name())
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// unknownRanges is the ranges of ids (jobids.Ranges') in which no job
// is: those of a listing that showed no job of them, checked again
// whatever -q, -t or -s narrowed the listing to.
func unknownRanges(ctx context.Context, cl *client.Client, ranges [][2]int64) ([][2]int64, error) {
	var unknown [][2]int64
	for _, r := range ranges {
		found, err := anyJob(ctx, cl, r[0], r[1])
		if err != nil {
			return nil, err
		}
		if !found {
			unknown = append(unknown, r)
		}
	}
	return unknown, nil
}
