package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/acct"
	"github.com/mq-hpc/mq/cmd/internal/columns"
	"github.com/mq-hpc/mq/cmd/internal/habits"
	"github.com/mq-hpc/mq/cmd/internal/jobids"
	"github.com/mq-hpc/mq/protocol"
)

// recentEnded is how many ended jobs the table shows after those not
// ended, unless -a or -s asks otherwise: the view is what runs and waits,
// as squeue's and qstat's, with the latest ends beside it.
const recentEnded = 20

// mqstatList is the listing: at most limit jobs (unless 0), as a table,
// as --acct accounting or as --json, a job array as one line unless
// every member is asked for. The table lists the jobs not ended, then the
// last recentEnded ended ones (mqstatRecent), unless -a, -s or --array
// says which. A selection that lists no job returns noneListed, in the
// table and --acct, which people read: not under --watch (whose view it
// would interrupt), nor --json and --format, for programs, which an
// empty list or a header alone tells.
func mqstatList(c *cli.Context, cl *client.Client, w io.Writer, limit int) error {
	n, err := listJobs(c, cl, w, limit)
	if n > 0 || err != nil || c.Bool("watch") || c.Bool("json") || c.IsSet("format") {
		return err
	}
	var sel []string
	if id := c.Int64("array"); id > 0 {
		sel = append(sel, "--array "+strconv.FormatInt(id, 10))
	}
	for _, f := range []string{"q", "t", "target-prefix", "s"} {
		if c.IsSet(f) {
			sel = append(sel, habits.Dashed(f)+" "+protocol.Printable(c.String(f)))
		}
	}
	if c.NArg() == 0 && sel == nil {
		return nil // no selection: an empty metaqueue, a table of nothing
	}
	return noneListed{"no job matches " + protocol.ClipText(strings.Join(append(c.Args().Slice(), sel...), " "), 300)}
}

// noneListed is a listing of a selection (ids, --array, -q, -t, -s) that matched
// no job: no error (exit 0, as squeue -n), said on stderr after the
// listing's header, so that a mistyped name does not pass unseen.
type noneListed struct{ msg string }

func (e noneListed) Error() string { return e.msg }

// saidNone says a noneListed on stderr, after the listing, and is nil
// for it; any other err it passes on.
func saidNone(c *cli.Context, err error) error {
	if none, ok := err.(noneListed); ok {
		fmt.Fprintf(c.App.ErrWriter, "%s: %s\n", c.App.Name, none.msg)
		return nil
	}
	return err
}

// listJobs is mqstatList's listing; it returns the rows printed.
func listJobs(c *cli.Context, cl *client.Client, w io.Writer, limit int) (int, error) {
	st := protocol.Stat{Queue: c.String("q"), Target: c.String("t"), TargetPrefix: c.String("target-prefix"), States: statesFlag(c), Limit: limit}
	asJSON := c.Bool("json")
	accounting := c.Bool("acct")
	ids, _ := jobids.Ranges(c.Args().Slice()) // checked by the action
	fields, _ := formatFields(c)              // likewise
	recent := !c.Bool("a") && !c.IsSet("s") && !c.IsSet("array") && ids == nil
	if !asJSON && !accounting && fields == nil && recent {
		return mqstatRecent(c, cl, w, st, limit)
	}
	var sums acct.Sums
	var use acct.Use
	st.Earlier = accounting
	// The table shows a job array as one line; --json, --acct and
	// --array list every member.
	var arrs []protocol.ArrayInfo
	if id := c.Int64("array"); id > 0 {
		r, err := client.Do(c.Context, cl, protocol.OpArrays, protocol.ArrayQuery{Job: id})
		if err != nil {
			return 0, err
		}
		if len(r.Arrays) == 0 {
			return 0, fmt.Errorf("job %d is in no job array", id)
		}
		st.From, st.To = r.Arrays[0].First, r.Arrays[0].Last
		if st.States == "" {
			st.States = allStates // every member, as a range of ids lists its jobs
		}
	} else if !asJSON && !accounting && fields == nil && st.TargetPrefix == "" && ids == nil {
		var err error
		if arrs, err = collapsed(c, cl, &st); err != nil {
			return 0, err
		}
	}
	if fields != nil {
		return mqstatFields(c, cl, w, st, ids, fields, recent)
	}
	if asJSON {
		io.WriteString(w, "[")
		first := true
		n := 0
		err := streamStat(c, cl, st, ids, func(r protocol.StatReply) error {
			n += len(r.Jobs)
			for _, j := range r.Jobs {
				if !first {
					io.WriteString(w, ",\n")
				}
				first = false
				b, _ := json.Marshal(j)
				w.Write(b)
			}
			return nil
		})
		if listed(err) != nil {
			return n, err
		}
		io.WriteString(w, "]\n")
		return n, err
	}
	tw := columns.New(w)
	if accounting {
		fmt.Fprintln(tw, acct.Header)
		now := time.Now()
		n := 0
		err := streamStat(c, cl, st, ids, func(r protocol.StatReply) error {
			n += len(r.Jobs)
			for _, j := range r.Jobs {
				acct.Line(tw, j, now)
				sums.Add(j)
				use.Add(j)
			}
			return nil
		})
		if listed(err) != nil {
			tw.Flush()
			return n, err
		}
		if ferr := tw.Flush(); ferr != nil {
			return n, ferr
		}
		fmt.Fprintln(w)
		sums.Print(w)
		use.Print(w)
		return n, err
	}
	fmt.Fprintln(tw, tableHeader)
	n, err := streamTable(c, cl, tw, st, ids, arrs)
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return n, err
}

// tableHeader is the listing's first line.
const tableHeader = "ID\tQUEUE\tTARGET\tS\tATT\tHOST\tSUBMITTED\tSTARTED\tFINISHED\tEXIT\tCOMMAND"

// collapsed asks for the job arrays of st's selection, to show each as
// one line, and makes st leave their members out.
func collapsed(c *cli.Context, cl *client.Client, st *protocol.Stat) ([]protocol.ArrayInfo, error) {
	r, err := client.Do(c.Context, cl, protocol.OpArrays, protocol.ArrayQuery{Queue: st.Queue, Target: st.Target, States: st.States})
	if err != nil {
		return nil, err
	}
	st.Collapse = true
	return r.Arrays, nil
}

// mqstatRecent is the default table: the jobs not ended (arrays with a
// member not ended as one line each), then the last recentEnded ended
// jobs outside arrays with the arrays that ended among them, and a line
// saying how to see older ones when there may be some. A limit (--limit,
// or --watch's terminal height) is shared, the jobs not ended first.
func mqstatRecent(c *cli.Context, cl *client.Client, w io.Writer, st protocol.Stat, limit int) (int, error) {
	live := st
	live.States = "WQHEB"
	var arrs []protocol.ArrayInfo
	if st.TargetPrefix == "" {
		var err error
		if arrs, err = collapsed(c, cl, &live); err != nil {
			return 0, err
		}
	}
	tw := columns.New(w)
	fmt.Fprintln(tw, tableHeader)
	n, err := streamTable(c, cl, tw, live, nil, arrs)
	if err != nil {
		tw.Flush()
		return n, err
	}
	if limit > 0 && n >= limit {
		return n, tw.Flush()
	}
	ended := st
	ended.States, ended.Limit = "DF", 0
	ended.Last = recentEnded
	if limit > 0 {
		ended.Last = min(recentEnded, limit-n)
	}
	var done []protocol.ArrayInfo
	if st.TargetPrefix == "" {
		if done, err = collapsed(c, cl, &ended); err != nil {
			tw.Flush() // the jobs not ended, printed before the error
			return n, err
		}
		done = slices.DeleteFunc(done, func(a protocol.ArrayInfo) bool {
			return slices.ContainsFunc(arrs, func(b protocol.ArrayInfo) bool { return b.First == a.First })
		})
	}
	var rows []protocol.JobInfo
	if err := client.Stream(c.Context, cl, protocol.OpStat, ended, func(r protocol.StatReply) error {
		rows = append(rows, r.Jobs...)
		return nil
	}); err != nil {
		tw.Flush()
		return n, err
	}
	// The arrays that ended among the rows shown (all of them when the
	// rows are every ended job there is).
	if len(rows) >= ended.Last && len(rows) > 0 {
		done = slices.DeleteFunc(done, func(a protocol.ArrayInfo) bool { return a.Last < rows[0].ID })
	}
	if limit > 0 {
		done = done[:min(len(done), max(limit-n-len(rows), 0))]
	}
	now := time.Now()
	for _, j := range rows {
		for len(done) > 0 && done[0].First < j.ID {
			printArrayRow(tw, done[0])
			done = done[1:]
		}
		printRow(tw, j, now, c.Bool("w"))
	}
	for _, a := range done {
		printArrayRow(tw, a)
	}
	n += len(rows) + len(done)
	if err := tw.Flush(); err != nil {
		return n, err
	}
	if len(rows) >= ended.Last && limit == 0 {
		fmt.Fprintf(w, "(the last %d ended jobs; mqstat -a lists every job, -s DF the ended ones)\n", len(rows))
	}
	return n, nil
}

// streamTable prints the table rows of st's jobs (narrowed to ids unless
// nil), and the arrays arrs among them by first id, to tw; it returns the
// rows printed. The caller flushes tw, which aligns every frame's rows
// (and the header, and the ended rows of the default view) as one table.
func streamTable(c *cli.Context, cl *client.Client, tw *columns.Writer, st protocol.Stat, ids [][2]int64, arrs []protocol.ArrayInfo) (int, error) {
	now := time.Now()
	n := 0
	err := streamStat(c, cl, st, ids, func(r protocol.StatReply) error {
		for _, j := range r.Jobs {
			for len(arrs) > 0 && arrs[0].First < j.ID {
				printArrayRow(tw, arrs[0])
				arrs = arrs[1:]
				n++
			}
			printRow(tw, j, now, c.Bool("w"))
			n++
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	for _, a := range arrs {
		printArrayRow(tw, a)
		n++
	}
	return n, nil
}

// targetHint warns on stderr when -t names a state of squeue -t and no
// job of that target: the listing, empty, would not say why.
func targetHint(c *cli.Context, cl *client.Client) {
	t := c.String("t")
	if !habits.SqueueState(t) {
		return
	}
	n := 0
	err := client.Stream(c.Context, cl, protocol.OpStat, protocol.Stat{Target: t, States: allStates, Limit: 1}, func(r protocol.StatReply) error {
		n += len(r.Jobs)
		return nil
	})
	if err == nil && n == 0 {
		fmt.Fprintf(c.App.ErrWriter, "mqstat: warning: no job has target %s: mq's -t is the target, and squeue's -t is mq's -s (-s E lists the running jobs)\n", t)
	}
}
