package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/acct"
	"github.com/mq-hpc/mq/cmd/internal/flagorder"
	"github.com/mq-hpc/mq/cmd/internal/habits"
	"github.com/mq-hpc/mq/cmd/internal/jobfields"
	"github.com/mq-hpc/mq/cmd/internal/joboutput"
	"github.com/mq-hpc/mq/cmd/internal/watch"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Mqstat returns the mqstat command.
func Mqstat(env Env) *cli.App {
	app := NewApp("mqstat", "show jobs in the metaqueue", env)
	app.UsageText = `mqstat [-q QUEUE] [-t TARGET | --target-prefix PREFIX] [-s STATES] [--json] [--limit N]
   mqstat [ID|FIRST-LAST ...] [-q QUEUE] [-t TARGET] [-s STATES] [--json] [--limit N]
   mqstat --format FIELD,FIELD... [--noheader] [any selection above]
   mqstat --acct [-q QUEUE] [-t TARGET] [-s STATES] [--json]
   mqstat -j ID [--json]
   mqstat --cat ID [--stderr] [--follow] [-O FILE]
   mqstat --cat FIRST-LAST|ID,ID...|all [ID...] [-q QUEUE] [-t TARGET] [-s STATES] [--stderr] [-O FILE]
   mqstat --summary [-q QUEUE] [-t TARGET | --target-prefix PREFIX] [--json]
   mqstat --watch [INTERVAL] [any of the above but --cat]`
	app.Description = `States: W waiting on prerequisites, Q queued (ready), H held (mqhold, mqsub -H;
mqrls releases it), P prefetched (handed to a placeholder that holds it for
its next free slot, not started), E executing, D done, F failed, B blocked by
a failed or deleted prerequisite, X deleted. -s E lists P jobs too (both are
handed out); -s P only those. --summary has an H or P column when a job is
held or prefetched.
Without -s every job but deleted ones is listed. Job ids and ranges
(mqstat 501 502 600-610) list those jobs whatever their state, members
of job arrays each on its own line, and so does --array ID its members; an id or a range no job has is said
on stderr (exit 1), a selection that matches nothing too (exit 0; not
with --json, --format); -j ID shows one in full. --format prints the jobs
as lines of the fields named, separated by tabs, "-" for none, every
array member on its own line; the fields: ` + jobfields.Names() + `.
The HOST column (and --format's where) is SITE/HOST for a job at a site
other than local. --watch shows the view again
every INTERVAL (default 2s; seconds up to 600 or a duration such as
500ms: mqstat --watch 601 watches job 601), in place
on a terminal (cut to its height), one after another otherwise, until
interrupted.`
	app.Flags = []cli.Flag{
		&cli.StringFlag{Name: "q", Aliases: []string{"queue"}, Usage: "only jobs of this queue"},
		&cli.StringFlag{Name: "t", Aliases: []string{"target"}, Usage: "only jobs of this target"},
		&cli.StringFlag{Name: "target-prefix", Usage: "only jobs whose target starts with `PREFIX` (listings, --summary)"},
		&cli.StringFlag{Name: "s", Aliases: []string{"states"}, Usage: "only jobs in these states, e.g. QE (E takes P too)"},
		&cli.BoolFlag{Name: "a", Aliases: []string{"all"}, Usage: fmt.Sprintf("list every job (the table lists those not ended, then the last %d ended)", recentEnded)},
		&cli.GenericFlag{Name: "j", Aliases: []string{"job"}, Value: new(jobIDValue), Usage: "show job `ID` in full"},
		&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		&cli.StringFlag{Name: "format", Usage: "print each job as a line of these `FIELDS` (comma-separated, e.g. id,state,exit), separated by tabs, after a header line"},
		&cli.BoolFlag{Name: "noheader", Usage: "with --format: no header line"},
		&cli.BoolFlag{Name: "summary", Usage: "count jobs per queue and state"},
		&cli.IntFlag{Name: "limit", Usage: "list at most `N` jobs", DefaultText: "all"},
		&cli.GenericFlag{Name: "array", Value: new(jobIDValue), Usage: "list each member of the job array holding job `ID` (the listing shows an array as one line)"},
		&cli.BoolFlag{Name: "w", Aliases: []string{"wide"}, Usage: "do not shorten commands"},
		&cli.StringFlag{Name: "cat", Usage: "print the stdout of job `ID` (its latest attempt); of a selection (a range FIRST-LAST, several ids, all; narrowed by -q, -t, -s), each job's in id order after a line \"==> job ID attempt N target T state S stdout <==\""},
		&cli.StringFlag{Name: "O", Aliases: []string{"output-file"}, Usage: "with --cat: write the output to `FILE` instead of stdout (put in place once whole)"},
		// The old spelling: -o is mqsub's declared output, so mqstat's
		// is --cat now (hq job cat); this keeps scripts working.
		&cli.GenericFlag{Name: "output", Aliases: []string{"o"}, Value: new(jobIDValue), Hidden: true},
		&cli.BoolFlag{Name: "stderr", Usage: "with --cat: print stderr instead"},
		&cli.BoolFlag{Name: "f", Aliases: []string{"follow"}, Usage: "with --cat: print the output as it is written, until the job ends; exit as the job did (130 if interrupted: the job goes on)"},
		&cli.BoolFlag{Name: "acct", Usage: "accounting, like sacct: each attempt's host, start, elapsed time, CPU and max RSS, then a summary per target"},
		&cli.BoolFlag{Name: "watch", Usage: "show the view again every INTERVAL (the argument after it, else --interval)"},
		&cli.DurationFlag{Name: "interval", Value: 2 * time.Second, Usage: "with --watch: time between views"},
		userFlag("jobs of `USER`, as squeue -u and qstat -u: a CLS holds its owner's jobs only, so your own name lists them all and another's is refused", false),
		// squeue --me: every job a CLS holds is its owner's.
		&cli.BoolFlag{Name: "me", Hidden: true},
		// qstat -x (PBS's job history): refused with mq's -a.
		&cli.BoolFlag{Name: "x", Aliases: []string{"history"}, Hidden: true},
	}
	// Flags after job ids count (mqstat 501-510 -s F), as mqdel's do.
	flagsAhead := flagorder.First(app.Flags)
	app.Metadata = map[string]any{rewriteArgs: func(args []string) []string { return flagsAhead(watch.Args(args)) }}
	app.Action = func(c *cli.Context) error {
		if err := checkMqstat(c, env); err != nil {
			return err
		}
		cl, err := Dial(c.Context, env, "mqstat")
		if err != nil {
			return err
		}
		defer cl.Close()
		if c.Bool("watch") {
			return watchView(c, c.Duration("interval"), func(w io.Writer, limit int) error { return mqstatView(c, cl, w, limit) })
		}
		w := bufio.NewWriterSize(c.App.Writer, 64<<10)
		err = mqstatView(c, cl, w, c.Int("limit"))
		w.Flush() // the listing, then any warning of what it cannot show
		return warnNoSite(c, cl, saidNone(c, err))
	}
	return app
}

// checkMqstat refuses the flags that do not go together, before mqstat
// dials, and makes a relative -O FILE absolute where the command runs.
func checkMqstat(c *cli.Context, env Env) error {
	every := c.Duration("interval")
	cat, catSet, err := parseCat(c)
	if err != nil {
		return err
	}
	if err := checkListing(c); err != nil {
		return err
	}
	if err := checkOwnUser(c); err != nil {
		return err
	}
	if every < 100*time.Millisecond {
		return Usagef("--watch's interval must be at least 100ms (--watch 0.1, or --interval 100ms)")
	}
	if c.IsSet("interval") && !c.Bool("watch") {
		return Usagef("--interval goes with --watch")
	}
	if c.Bool("watch") && (c.IsSet("cat") || c.IsSet("output")) {
		return Usagef("--watch does not go with --cat")
	}
	if c.IsSet("s") {
		if _, err := job.ParseStates(statesFlag(c)); err != nil {
			return Usagef("-s: %v%s", err, squeueStates)
		}
		if squeuePD(c) {
			fmt.Fprintf(c.App.ErrWriter, "mqstat: warning: %s\n", pdHint)
		}
	}
	if c.Bool("x") {
		return Usagef("-x is qstat's spelling; mqstat -a lists every job, the ended ones too (-s DF only those)")
	}
	if err := oneTarget(c); err != nil {
		return err
	}
	if c.IsSet("j") && c.Int64("j") <= 0 {
		return Usagef("-j needs a job id")
	}
	if c.IsSet("array") && c.Int64("array") <= 0 {
		return Usagef("--array needs a job id")
	}
	if c.Int("limit") < 0 {
		return Usagef("--limit must be 0 (no limit) or more, not %d", c.Int("limit"))
	}
	if catSet && cat.ranges == nil && cat.id <= 0 {
		return Usagef("--cat needs a job id")
	}
	if c.Bool("stderr") && !catSet {
		return Usagef("--stderr goes with --cat ID")
	}
	if id, err := strconv.ParseInt(c.Args().First(), 10, 64); c.Bool("f") && !catSet && err == nil && id > 0 {
		return Usagef("-f %d is qstat's full view; mq writes mqstat -j %d (mqstat --cat %d -f follows its output)", id, id, id)
	}
	if c.Bool("f") && !catSet { // qstat -f alone: every job in full
		return Usagef("--follow goes with --cat ID (one job); qstat -f's full view of a job is mqstat -j ID")
	}
	if c.Bool("f") && cat.ranges != nil {
		return Usagef("--follow goes with --cat ID (one job)")
	}
	if c.IsSet("O") && (!catSet || c.Bool("f")) {
		return Usagef("-O goes with --cat, not --follow")
	}
	if p := c.String("O"); p != "" && !filepath.IsAbs(p) {
		// Relative to where the command runs: over SSH that is the
		// user's home (env.Getwd), not the CLS's directory.
		wd, err := env.Getwd()
		if err != nil {
			return fmt.Errorf("-O %s: %w", p, err)
		}
		c.Set("O", filepath.Join(wd, p))
	}
	if c.Bool("summary") {
		// --summary counts every state of the selection: a flag it
		// would drop must not look as if it narrowed the counts.
		for _, f := range []string{"s", "j", "limit", "array", "a", "acct", "cat", "output"} {
			if c.IsSet(f) {
				return Usagef("%s does not go with --summary (it counts every state of -q, -t or --target-prefix)", habits.Dashed(f))
			}
		}
	}
	return nil
}

// jobIDValue is a job id given to a flag (-j, --array), read as mqdel
// reads ids: decimal digits only. The flag package reads integers as Go
// does, so Slurm's array task 25_3 was job 253 and 010 job 8.
type jobIDValue int64

func (v *jobIDValue) Set(s string) error {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return errors.New("not a job id")
	}
	*v = jobIDValue(id)
	return nil
}

// String is "" for none, so help shows no "(default: 0)".
func (v *jobIDValue) String() string {
	if *v == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*v), 10)
}

// mqstatView prints one view of mqstat's (a listing of at most limit jobs
// unless 0, a job, a summary, an output) to w.
func mqstatView(c *cli.Context, cl *client.Client, w io.Writer, limit int) error {
	cat, catSet, _ := parseCat(c) // checked by the action
	switch {
	case catSet && c.Bool("f"):
		return mqstatFollow(c, cl, w, cat.id)
	case catSet && cat.ranges != nil:
		return catTo(c, w, func(w io.Writer) error { return exportOutputs(c.Context, c, cl, w, c.App.ErrWriter, cat) })
	case catSet:
		return catTo(c, w, func(w io.Writer) error { return mqstatCat(c, cl, w, cat.id) })
	case c.Bool("summary"):
		return mqstatSummary(c, cl, w)
	case c.IsSet("j"):
		return mqstatJob(c, cl, w)
	}
	return mqstatList(c, cl, w, limit)
}

// mqstatFollow is --cat ID -f: the job's output as it is written.
func mqstatFollow(c *cli.Context, cl *client.Client, w io.Writer, catID int64) error {
	stream := "stdout"
	if c.Bool("stderr") {
		stream = "stderr"
	}
	bw, ok := w.(*bufio.Writer) // flushed after each frame
	if !ok {
		bw = bufio.NewWriter(w)
		defer bw.Flush()
	}
	end, err := joboutput.Follow(c.Context, cl, bw, c.App.ErrWriter, catID, stream)
	if err == nil {
		err = jobExit(end) // as mqsub -b: nil if done, the job's exit status if it failed
	}
	return interrupted(c.Context, err, fmt.Sprintf("job %d goes on (mqstat --cat %d --follow again to follow it)", catID, catID))
}

// mqstatCat is --cat ID: the job's output.
func mqstatCat(c *cli.Context, cl *client.Client, w io.Writer, catID int64) error {
	d, err := client.Do(c.Context, cl, protocol.OpJob, protocol.JobQuery{ID: catID, Output: true})
	if err != nil {
		return err
	}
	if err := joboutput.Print(w, d, c.Bool("stderr")); err != nil {
		return err
	}
	stream := "stdout"
	if c.Bool("stderr") {
		stream = "stderr"
	}
	if lost := protocol.LostFor(d.OutputLost, stream); lost != "" {
		// Whatever was kept is printed (and kept in -O's file); that it
		// is not all must not pass for an empty or short output.
		return partialExport{fmt.Errorf("job %d's %s was lost: %s", d.ID, stream, lost)}
	}
	return nil
}

// mqstatSummary is --summary: the jobs per queue and state.
func mqstatSummary(c *cli.Context, cl *client.Client, w io.Writer) error {
	r, err := client.Do(c.Context, cl, protocol.OpSummary, protocol.Empty{})
	if err != nil {
		return err
	}
	if c.IsSet("q") || c.IsSet("t") || c.IsSet("target-prefix") {
		if r.Queues, err = filteredSummary(c, cl, r.Queues); err != nil {
			return err
		}
		r.Moved, r.Waste = nil, nil
	}
	if c.Bool("json") {
		return writeJSON(w, r.Queues)
	}
	printSummary(w, r.Queues)
	if r.Moved != nil {
		fmt.Fprintln(w, MovedLine(*r.Moved))
	}
	if r.Waste != nil {
		fmt.Fprintln(w, WasteLine(*r.Waste))
	}
	return nil
}

// mqstatJob is -j ID: one job in detail.
func mqstatJob(c *cli.Context, cl *client.Client, w io.Writer) error {
	d, err := client.Do(c.Context, cl, protocol.OpJob, protocol.JobQuery{ID: c.Int64("j")})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return writeJSON(w, d)
	}
	printJob(w, d)
	if d.State == "Q" && !c.Bool("watch") {
		// Ready and not running: the sites may say why, as a listing's
		// warnings do (not under --watch, whose screen they would break).
		if bw, ok := w.(*bufio.Writer); ok {
			bw.Flush()
		}
		warnSites(c, cl)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printRow(tw io.Writer, j protocol.JobInfo, now time.Time, wide bool) {
	host := protocol.Printable(jobfields.Where(j.Site, j.Host))
	if host == "" {
		host = "-"
	}
	if (j.State == "W" || j.State == "B") && len(j.Prereqs)+len(j.AfterAny) > 0 {
		host = "<- " + prereqCell(prereqNames(j), wide)
	}
	exit := "-"
	if j.Exit != nil {
		exit = fmt.Sprint(*j.Exit)
	}
	cmd := protocol.Printable(strings.ReplaceAll(protocol.CommandOf(j.Command, j.CommandBytes), "\n", " "))
	if !wide && len(cmd) > 60 {
		cmd = protocol.ClipText(cmd, 60)
	}
	fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, protocol.Printable(j.Queue), protocol.Printable(j.Target), protocol.Printable(j.State), j.Attempts, host,
		acct.ShortTime(j.Submitted, now), acct.ShortTime(j.Started, now), acct.ShortTime(j.Finished, now), exit, cmd)
}

// prereqNames lists a job's prerequisites for the HOST cell, its
// after-any ones marked "any:".
func prereqNames(j protocol.JobInfo) []string {
	if len(j.AfterAny) == 0 {
		return j.Prereqs
	}
	names := slices.Clip(j.Prereqs)
	for _, t := range j.AfterAny {
		names = append(names, "any:"+t)
	}
	return names
}

// prereqCell names a waiting or blocked job's prerequisites in the HOST
// column: those that fit in about 30 columns and how many more ("a,b +3"),
// all of them with -w. -j lists them all.
func prereqCell(prereqs []string, wide bool) string {
	const width = 30
	var b strings.Builder
	for i, p := range prereqs {
		p = protocol.Printable(p)
		if !wide && i > 0 && b.Len()+1+len(p) > width {
			fmt.Fprintf(&b, " +%d", len(prereqs)-i)
			break
		}
		if !wide && i == 0 && len(p) > width {
			p = protocol.ClipText(p, width)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p)
	}
	return b.String()
}

// printArrayRow prints a job array as one line of the listing: its id
// range, queue, target, and its members counted by state.
func printArrayRow(tw io.Writer, a protocol.ArrayInfo) {
	fmt.Fprintf(tw, "%d-%d\t%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t%s\n", a.First, a.Last, protocol.Printable(a.Queue), protocol.Printable(a.Target),
		"A", arrayLine(a))
}

// arrayLine describes a job array: its --array text, size and members by
// state, e.g. "array 1-1000%10, 1000 jobs: 10 E, 990 Q".
func arrayLine(a protocol.ArrayInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "array %s, %d jobs:", protocol.ClipText(protocol.Printable(a.Spec), 100), a.Last-a.First+1)
	sep := " "
	for _, st := range job.States {
		if n := a.Counts[string(st)]; n > 0 {
			fmt.Fprintf(&b, "%s%d %s", sep, n, st)
			sep = ", "
		}
	}
	if a.Limit > 0 {
		fmt.Fprintf(&b, " (at most %d executing)", a.Limit)
	}
	return b.String()
}

func printSummary(w io.Writer, qs []protocol.QueueCounts) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	states := summaryStates(qs)
	fmt.Fprint(tw, "QUEUE\t")
	for _, s := range states {
		fmt.Fprintf(tw, "%s\t", s)
	}
	fmt.Fprintln(tw, "TOTAL\tPOLICY\t")
	total := map[string]int{}
	for _, q := range qs {
		label := q.Queue
		if q.Target != "" {
			label += " target " + q.Target
		}
		fmt.Fprintf(tw, "%s\t", protocol.Printable(label))
		n := 0
		for _, s := range states {
			fmt.Fprintf(tw, "%d\t", q.Counts[s.String()])
			n += q.Counts[s.String()]
			total[s.String()] += q.Counts[s.String()]
		}
		fmt.Fprintf(tw, "%d\t%s\t\n", n, protocol.Printable(q.Policy))
	}
	if len(qs) > 1 {
		fmt.Fprint(tw, "all\t")
		n := 0
		for _, s := range states {
			fmt.Fprintf(tw, "%d\t", total[s.String()])
			n += total[s.String()]
		}
		fmt.Fprintf(tw, "%d\t\t\n", n)
	}
	tw.Flush()
	for _, q := range qs {
		if line := SpendingLine(q); line != "" {
			fmt.Fprintln(w, line)
		}
	}
}

// summaryStates are --summary's state columns: H and P only when some
// job is held or prefetched (a metaqueue that never holds shows the
// columns it always had).
func summaryStates(qs []protocol.QueueCounts) []job.State {
	return slices.DeleteFunc(slices.Clone(job.States), func(s job.State) bool {
		if s != job.Held && s != job.Prefetched {
			return false
		}
		for _, q := range qs {
			if q.Counts[s.String()] > 0 {
				return false
			}
		}
		return true
	})
}

// SpendingLine is a queue's economics in mqstat --summary: what its
// attempts cost, per site, against its budget and deadline, its jobs
// that cannot end by the deadline and those its budget left cannot pay
// for ("" for a queue with none). A target's row (--summary -t) has
// what its jobs' attempts cost.
func SpendingLine(q protocol.QueueCounts) string {
	if q.Spent == 0 && len(q.SpentBySite) == 0 && q.Budget == 0 && q.Deadline == 0 && q.Infeasible == 0 && q.OverBudget == 0 {
		return ""
	}
	var b strings.Builder
	if q.Target != "" {
		fmt.Fprintf(&b, "target %s", protocol.Printable(q.Target))
		if q.Queue != "" && q.Queue != "all" {
			fmt.Fprintf(&b, " of queue %s", protocol.Printable(q.Queue))
		}
	} else {
		fmt.Fprintf(&b, "queue %s", protocol.Printable(q.Queue))
	}
	fmt.Fprintf(&b, " spent %.4g", q.Spent)
	if q.Budget > 0 {
		fmt.Fprintf(&b, " of budget %.4g", q.Budget)
	}
	if len(q.SpentBySite) > 0 {
		sites := slices.Sorted(maps.Keys(q.SpentBySite))
		parts := make([]string, 0, len(sites))
		for _, site := range sites {
			parts = append(parts, fmt.Sprintf("%s %.4g", protocol.Printable(site), q.SpentBySite[site]))
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	if q.Deadline > 0 {
		fmt.Fprintf(&b, ", deadline %s", time.Unix(0, int64(q.Deadline*1e9)).UTC().Format(time.RFC3339))
	}
	if q.Infeasible > 0 {
		fmt.Fprintf(&b, ", %d jobs cannot end by it at any site", q.Infeasible)
	}
	if q.OverBudget > 0 {
		fmt.Fprintf(&b, ", %d jobs not started the budget left cannot pay for", q.OverBudget)
	}
	return b.String()
}

func printJob(w io.Writer, d protocol.JobDetail) {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	// Every value is escaped here; callers pass it raw.
	p := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", protocol.Printable(k), protocol.Printable(v))
		}
	}
	fmt.Fprintf(tw, "job:\t%d\n", d.ID)
	p("queue", d.Queue)
	p("target", d.Target)
	if a := d.Array; a != nil {
		p("array", fmt.Sprintf("jobs %d-%d, %s (mqstat --array %d lists them)", a.First, a.Last, arrayLine(*a), d.ID))
	}
	p("state", joboutput.StateName(d.State))
	if d.State == string(job.Held) {
		p("held", fmt.Sprintf("not run until released: mqrls %d", d.ID))
	}
	if d.Priority != 0 {
		p("priority", fmt.Sprint(d.Priority))
	}
	p("command", protocol.CommandOf(d.Command, d.CommandBytes))
	p("directory", d.Cwd)
	if d.Est > 0 {
		p("estimate", fmt.Sprintf("%gs", d.Est))
	}
	if d.TimeLimit > 0 {
		p("time limit", fmt.Sprintf("%gs", d.TimeLimit))
	}
	p("resources", d.Resources.Describe())
	if d.Granted != nil {
		p("granted", d.Granted.String())
	}
	if len(d.Prereqs) > 0 {
		p("prerequisites", strings.Join(d.Prereqs, ", "))
	}
	for _, ts := range d.WaitingOn {
		if !ts.AfterAny {
			p("  "+ts.Target, targetStatus(ts))
		}
	}
	if len(d.AfterAny) > 0 {
		p("after any", strings.Join(d.AfterAny, ", "))
	}
	for _, ts := range d.WaitingOn {
		if ts.AfterAny {
			p("  "+ts.Target, afterAnyStatus(ts))
		}
	}
	p("attempts", fmt.Sprint(d.Attempts))
	if d.Site != "" {
		p("placeholder", fmt.Sprintf("%d (site %s, host %s)", d.Placeholder, d.Site, d.Host))
	}
	if d.Plan != nil {
		p("plan", planLine(d))
	}
	p("infeasible", d.Infeasible)
	p("over budget", d.OverBudget)
	p("cannot run", d.Unfit)
	p("submitted", d.Submitted)
	p("started", d.Started)
	p("finished", d.Finished)
	if d.Exit != nil {
		p("exit status", fmt.Sprint(*d.Exit))
	}
	p("reason", d.Reason)
	if b := d.BlockedBy; b != nil && b.Job == 0 {
		p("blocked by", fmt.Sprintf("target %s, whose failed or deleted jobs were purged (cls purge): no job is left to rerun, so it stays failed; mqdel this job", b.Target))
	} else if b != nil {
		p("blocked by", fmt.Sprintf("job %d (%s, target %s): mqsub --rerun %d, or mqdel this job", b.Job, joboutput.StateName(b.State), b.Target, b.Job))
	}
	// A job that never started (deleted while held, queued or
	// prefetched) ran for no time: no elapsed 0.000s.
	p("usage", acct.UsageLine(d.Accounting, d.Started != "" && d.Finished != ""))
	p("output lost", d.OutputLost)
	if d.Stdout != "" {
		here := d.Host != "" && d.Host == joboutput.ThisHost()
		p("stdout", joboutput.Line(d, false, here))
		p("stderr", joboutput.Line(d, true, here))
		if d.StdoutCopy != "" {
			p("copies here", d.StdoutCopy+", "+d.StderrCopy)
		}
	}
	for i, f := range d.Inputs {
		fmt.Fprintf(tw, "%s\t%s\n", fileLabel("inputs", i), protocol.Printable(fileLine(f)))
	}
	for i, f := range d.Outputs {
		fmt.Fprintf(tw, "%s\t%s\n", fileLabel("outputs", i), protocol.Printable(fileLine(f)))
	}
	for i, t := range d.Transfers {
		fmt.Fprintf(tw, "%s\t%s\n", fileLabel("transfers", i), protocol.Printable(t.Path+": "+TransferLine(t)))
	}
	for _, l := range attemptLines(d) {
		p(fmt.Sprintf("attempt %d", l.n), l.line)
	}
	for _, a := range d.Copies {
		p(fmt.Sprintf("attempt %d", a.Attempt), fmt.Sprintf("%s on %s, since %s: a copy running beside the job's attempt", a.Site, a.Host, a.Started))
	}
	tw.Flush()
}

// attemptLine is one attempt in mqstat -j's list.
type attemptLine struct {
	n    int
	line string
}

// attemptLines lists d's attempts, those handed back unstarted with the
// others, in number order, so the numbers run on without a gap.
func attemptLines(d protocol.JobDetail) []attemptLine {
	var lines []attemptLine
	for _, a := range d.Unstarted {
		lines = append(lines, attemptLine{a.Attempt, fmt.Sprintf("%s on %s, %s: %s (not counted)", a.Site, a.Host, a.Finished, a.Reason)})
	}
	for _, a := range d.History {
		exit := "-"
		if a.Exit != nil {
			exit = fmt.Sprint(*a.Exit)
		}
		span := a.Started + " to " + a.Finished
		if a.Started == "" {
			span = "not started, ended " + a.Finished // deleted while prefetched, then rerun
		}
		line := fmt.Sprintf("%s on %s, %s, exit %s: %s", a.Site, a.Host, span, exit, a.Reason)
		if u := acct.UsageLine(a.Accounting, a.Started != "" && a.Finished != ""); u != "" {
			line += "; " + u
		}
		if a.OutputLost != "" {
			line += "; output lost: " + a.OutputLost
		}
		if a.Command != "" {
			line += "; it ran: " + protocol.ClipText(a.Command, 200)
		}
		lines = append(lines, attemptLine{a.Attempt, line})
	}
	slices.SortStableFunc(lines, func(a, b attemptLine) int { return a.n - b.n })
	return lines
}

// planLine says where a plan put the job and whether it ran there.
func planLine(d protocol.JobDetail) string {
	line := fmt.Sprintf("site %s (%s, #%d in its order)", d.Plan.Site, d.Plan.Planner, d.Plan.Seq+1)
	switch {
	case d.Site == "":
	case d.Site == d.Plan.Site:
		line += ", followed"
	default:
		line += ", not followed: ran at " + d.Site + " (the planned site did not take it in time)"
	}
	return line
}

func targetStatus(ts protocol.TargetStatus) string {
	total := ts.PurgedDone + ts.PurgedBad
	var parts []string
	keys := make([]string, 0, len(ts.Counts))
	for k := range ts.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		total += ts.Counts[k]
		if k != "D" {
			parts = append(parts, fmt.Sprintf("%d %s", ts.Counts[k], job.State(k[0]).Name()))
		}
	}
	switch {
	case total == 0:
		return "waiting: the target has no jobs yet"
	case ts.Complete:
		return fmt.Sprintf("complete (%d done%s)", total, purgedNote(ts))
	}
	s := fmt.Sprintf("%d of %d done", ts.Counts["D"]+ts.PurgedDone, total)
	if len(parts) > 0 {
		s += "; " + strings.Join(parts, ", ")
	}
	if ts.PurgedDone+ts.PurgedBad > 0 {
		s += fmt.Sprintf("; %d purged (%d done, %d failed or deleted)", ts.PurgedDone+ts.PurgedBad, ts.PurgedDone, ts.PurgedBad)
	}
	return s
}

// purgedNote says how many of a complete target's jobs were purged.
func purgedNote(ts protocol.TargetStatus) string {
	if ts.PurgedDone > 0 {
		return fmt.Sprintf(", %d of them purged", ts.PurgedDone)
	}
	return ""
}

// afterAnyStatus describes an after-any prerequisite target: ended (with
// how its jobs ended) or how many of its jobs have still to end.
func afterAnyStatus(ts protocol.TargetStatus) string {
	total, endedN := 0, 0
	var ended, left []string
	keys := make([]string, 0, len(ts.Counts))
	for k := range ts.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n := ts.Counts[k]
		total += n
		part := fmt.Sprintf("%d %s", n, job.State(k[0]).Name())
		if s := job.State(k[0]); s == job.Done || s.Bad() {
			ended = append(ended, part)
			endedN += n
		} else {
			left = append(left, part)
		}
	}
	if n := ts.PurgedDone + ts.PurgedBad; n > 0 {
		ended = append(ended, fmt.Sprintf("%d purged", n))
		total, endedN = total+n, endedN+n
	}
	jobs := "jobs"
	if total == 1 {
		jobs = "job"
	}
	switch {
	case total == 0:
		return "waiting: the target has no jobs yet"
	case ts.Ended:
		return fmt.Sprintf("ended (%d %s: %s)", total, jobs, strings.Join(ended, ", "))
	}
	return fmt.Sprintf("%d of %d ended; %s", endedN, total, strings.Join(left, ", "))
}

func fileLabel(kind string, i int) string {
	if i == 0 {
		return kind + ":"
	}
	return ""
}

// fileLine shows a declared file: path, size, checksum, where a job
// produced it, and the places holding a replica.
func fileLine(f protocol.FileInfo) string {
	s := f.Path
	if f.Size != nil {
		s += fmt.Sprintf(" (%s)", acct.HumanBytes(*f.Size))
	}
	if f.SHA256 != "" {
		s += ", sha256 " + ShortSum(f.SHA256)
	}
	switch {
	case f.Site == "" || f.Job == 0: // the catalog places a user's own file at local, with no producer
		s += ", not produced by a job"
	case f.Host != "":
		s += fmt.Sprintf(", produced by job %d at site %s, host %s", f.Job, f.Site, f.Host)
	default:
		s += fmt.Sprintf(", produced by job %d at site %s", f.Job, f.Site)
	}
	if len(f.Replicas) > 0 {
		s += ", replicas: " + Replicas(f.Replicas)
	}
	return s
}
