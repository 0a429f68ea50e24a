package cli

import (
	"io"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/habits"
	"github.com/mq-hpc/mq/cmd/internal/jobfields"
	"github.com/mq-hpc/mq/cmd/internal/jobids"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// statesFlag is -s's state letters, upper case, commas dropped (-s Q,E
// as squeue -t PD,R is written).
func statesFlag(c *cli.Context) string {
	return strings.ToUpper(strings.ReplaceAll(c.String("s"), ",", ""))
}

// squeuePD says whether -s names squeue's PD (pending), which mq reads
// as its own P and D (prefetched and done): what is listed is not what
// was meant, and nothing else would say so.
func squeuePD(c *cli.Context) bool {
	return slices.ContainsFunc(strings.Split(c.String("s"), ","), func(s string) bool { return strings.EqualFold(s, "PD") })
}

// pdHint follows what -s PD does: squeue's PD is mq's Q.
const pdHint = "-s PD is prefetched (P) and done (D) here; squeue's PD (pending) is Q (-s WQH: every job not started)"

// squeueStates follows an unknown state's error: the batch systems'
// state names users type out of habit, as mq names them.
const squeueStates = "; squeue's and qstat's R is E here (squeue's PD is Q, CD is D, CA is X)"

// checkListing refuses job ids and --format where they do not go: ids
// (mqstat 501 600-610, as qstat 501) select the listing's jobs, -j ID
// shows one in full.
func checkListing(c *cli.Context) error {
	if err := emptyName(c); err != nil {
		return err // mqstat -t "$T", T unset, listed every job
	}
	if c.IsSet("cat") || c.IsSet("output") {
		return nil // the ids are --cat's
	}
	ids, err := jobids.Ranges(c.Args().Slice())
	if err != nil {
		return Usagef("%v", err)
	}
	for _, f := range []string{"j", "array", "summary", "target-prefix"} {
		if ids != nil && c.IsSet(f) {
			return Usagef("job ids do not go with %s (they choose the jobs listed)", habits.Dashed(f))
		}
	}
	if _, err := formatFields(c); err != nil {
		return err
	}
	for _, f := range []string{"json", "acct", "summary", "j"} {
		if c.IsSet("format") && c.IsSet(f) {
			return Usagef("--format does not go with %s", habits.Dashed(f))
		}
	}
	if c.IsSet("noheader") && !c.IsSet("format") {
		return Usagef("--noheader goes with --format")
	}
	return nil
}

// formatFields is --format's fields, nil without it.
func formatFields(c *cli.Context) ([]jobfields.Field, error) {
	if !c.IsSet("format") {
		return nil, nil
	}
	fs, err := jobfields.Parse(c.String("format"))
	if err != nil {
		return nil, Usagef("--format: %v", err)
	}
	return fs, nil
}

// streamStat streams st's listing to fn, narrowed to ids unless nil: a
// request per group of ids, st.Limit shared by them. The ids named and
// the ranges given in which no job is are returned as unknownJobsError,
// unless -q, -t or -s narrow the listing (a job of another queue, target
// or state is not unknown) or it stopped at --limit.
func streamStat(c *cli.Context, cl *client.Client, st protocol.Stat, ids [][2]int64, fn func(protocol.StatReply) error) error {
	if ids == nil {
		return client.Stream(c.Context, cl, protocol.OpStat, st, fn)
	}
	if st.States == "" {
		st.States = allStates // a job named is listed whatever its state
	}
	named := jobids.Named(c.Args().Slice())
	spans := jobids.Spans(c.Args().Slice())
	seen := make([]bool, len(spans))
	at := 0 // the rows come in id order, the spans too
	n := 0
	count := func(r protocol.StatReply) error {
		n += len(r.Jobs)
		for _, j := range r.Jobs {
			delete(named, j.ID)
			for at < len(spans) && spans[at][1] < j.ID {
				at++
			}
			if at < len(spans) && spans[at][0] <= j.ID {
				seen[at] = true
			}
		}
		return fn(r)
	}
	for _, q := range jobids.Requests(st, ids) {
		if st.Limit > 0 {
			if n >= st.Limit {
				return nil
			}
			q.Limit = st.Limit - n
		}
		if err := client.Stream(c.Context, cl, protocol.OpStat, q, count); err != nil {
			return err
		}
	}
	if st.Queue != "" || st.Target != "" || c.IsSet("s") || st.Limit > 0 && n >= st.Limit {
		return nil
	}
	var empty [][2]int64
	for i, r := range spans {
		if !seen[i] {
			empty = append(empty, r)
		}
	}
	if len(named) == 0 && len(empty) == 0 {
		return nil
	}
	msg := ""
	if len(named) > 0 {
		msg = jobids.Unknown(named)
	}
	return &unknownJobsError{jobids.UnknownRanges(msg, empty)}
}

// allStates names every state, for a listing by job id.
var allStates = func() string {
	var b strings.Builder
	for _, s := range job.States {
		b.WriteString(s.String())
	}
	return b.String()
}()

// unknownJobsError says which job ids named no job has, as qstat's
// "Unknown Job Id": the listing shows the others, and ends whole.
type unknownJobsError struct{ msg string }

func (e *unknownJobsError) Error() string { return e.msg }

// listed is err unless it only says some jobs named were not found: the
// listing then ends as usual before err is returned.
func listed(err error) error {
	if _, ok := err.(*unknownJobsError); ok {
		return nil
	}
	return err
}

// mqstatFields is --format: the jobs the table would list (every array
// member on its own line), as lines of fields.
func mqstatFields(c *cli.Context, cl *client.Client, w io.Writer, st protocol.Stat, ids [][2]int64, fields []jobfields.Field, recent bool) (int, error) {
	if !c.Bool("noheader") {
		io.WriteString(w, jobfields.Header(fields))
	}
	now := time.Now()
	n := 0
	row := func(r protocol.StatReply) error {
		for _, j := range r.Jobs {
			if _, err := io.WriteString(w, jobfields.Row(fields, j, now)); err != nil {
				return err
			}
		}
		n += len(r.Jobs)
		return nil
	}
	if !recent {
		err := streamStat(c, cl, st, ids, row)
		return n, err
	}
	// As the table: the jobs not ended, then the last ended ones.
	live := st
	live.States = "WQHEB"
	if err := client.Stream(c.Context, cl, protocol.OpStat, live, row); err != nil {
		return n, err
	}
	if st.Limit > 0 && n >= st.Limit {
		return n, nil
	}
	ended := st
	ended.States, ended.Limit, ended.Last = "DF", 0, recentEnded
	if st.Limit > 0 {
		ended.Last = min(recentEnded, st.Limit-n)
	}
	err := client.Stream(c.Context, cl, protocol.OpStat, ended, row)
	return n, err
}
