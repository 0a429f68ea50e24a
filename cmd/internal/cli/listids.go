package cli

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/habits"
	"github.com/mq-hpc/mq/cmd/internal/jobfields"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// squeueStates follows an unknown state's error: the batch systems'
// state names users type out of habit, as mq names them.
const squeueStates = "; squeue's and qstat's R is E here (squeue's PD is Q, CD is D, CA is X)"

// statIDs is how many single ids one listing request names (the CLS
// takes up to 10,000).
const statIDs = 1000

// checkListing refuses job ids and --format where they do not go: ids
// (mqstat 501 600-610, as qstat 501) select the listing's jobs, -j ID
// shows one in full.
func checkListing(c *cli.Context) error {
	if c.IsSet("cat") || c.IsSet("output") {
		return nil // the ids are --cat's
	}
	ids, err := listIDs(c.Args().Slice())
	if err != nil {
		return err
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

// listIDs reads the job ids and ranges FIRST-LAST given to the listing,
// space- or comma-separated as mqdel reads them, sorted and merged where
// they meet; nil for none.
func listIDs(args []string) ([][2]int64, error) {
	var rs [][2]int64
	for _, a := range args {
		for _, p := range strings.Split(a, ",") {
			first, last, isRange, err := parseRange(p)
			switch {
			case err != nil:
				return nil, err
			case !isRange:
				ids, err := parseIDs([]string{p})
				if err != nil {
					return nil, Usagef("%q is not a job id or a range FIRST-LAST (-j ID shows one job in full)", p)
				}
				if len(ids) == 0 {
					continue
				}
				first, last = ids[0], ids[0]
			}
			rs = append(rs, [2]int64{first, last})
		}
	}
	if len(args) > 0 && len(rs) == 0 {
		return nil, Usagef("no job id in %q", strings.Join(args, " "))
	}
	slices.SortFunc(rs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var merged [][2]int64
	for _, r := range rs {
		if n := len(merged); n > 0 && r[0] <= merged[n-1][1]+1 {
			merged[n-1][1] = max(merged[n-1][1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

// idRequests are the listing requests of st narrowed to ids, in id
// order: the single ids statIDs to a request, each range as From..To.
func idRequests(st protocol.Stat, ids [][2]int64) []protocol.Stat {
	var out []protocol.Stat
	var single []int64
	flush := func() {
		if len(single) > 0 {
			q := st
			q.IDs = single
			out = append(out, q)
			single = nil
		}
	}
	for _, r := range ids {
		if r[0] == r[1] {
			if single = append(single, r[0]); len(single) == statIDs {
				flush()
			}
			continue
		}
		flush()
		q := st
		q.From, q.To = r[0], r[1]
		out = append(out, q)
	}
	flush()
	return out
}

// streamStat streams st's listing to fn, narrowed to ids unless nil: a
// request per group of ids, st.Limit shared by them.
func streamStat(c *cli.Context, cl *client.Client, st protocol.Stat, ids [][2]int64, fn func(protocol.StatReply) error) error {
	if ids == nil {
		return client.Stream(c.Context, cl, protocol.OpStat, st, fn)
	}
	if st.States == "" {
		st.States = allStates // a job named is listed whatever its state
	}
	named := namedIDs(c.Args().Slice())
	n := 0
	count := func(r protocol.StatReply) error {
		n += len(r.Jobs)
		for _, j := range r.Jobs {
			delete(named, j.ID)
		}
		return fn(r)
	}
	for _, q := range idRequests(st, ids) {
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
	if len(named) == 0 || st.Queue != "" || st.Target != "" || c.IsSet("s") {
		return nil // a job of another queue, target or state is not unknown
	}
	return unknownJobs(named)
}

// allStates names every state, for a listing by job id.
var allStates = func() string {
	var b strings.Builder
	for _, s := range job.States {
		b.WriteString(s.String())
	}
	return b.String()
}()

// namedIDs is the set of the single job ids in args (not ranges: a range
// may hold ids never given), as mqstat reports the ones it did not find.
func namedIDs(args []string) map[int64]bool {
	named := map[int64]bool{}
	for _, a := range args {
		for _, p := range strings.Split(a, ",") {
			if _, _, isRange, _ := parseRange(p); isRange {
				continue
			}
			if id, err := strconv.ParseInt(p, 10, 64); err == nil {
				named[id] = true
			}
		}
	}
	return named
}

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

func unknownJobs(named map[int64]bool) error {
	ids := slices.Sorted(maps.Keys(named))
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	if len(ids) == 1 {
		return &unknownJobsError{fmt.Sprintf("job %s does not exist", s[0])}
	}
	return &unknownJobsError{fmt.Sprintf("jobs %s do not exist", strings.Join(s, ", "))}
}

// mqstatFields is --format: the jobs the table would list (every array
// member on its own line), as lines of fields.
func mqstatFields(c *cli.Context, cl *client.Client, w io.Writer, st protocol.Stat, ids [][2]int64, fields []jobfields.Field, recent bool) error {
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
		return streamStat(c, cl, st, ids, row)
	}
	// As the table: the jobs not ended, then the last ended ones.
	live := st
	live.States = "WQHEB"
	if err := client.Stream(c.Context, cl, protocol.OpStat, live, row); err != nil {
		return err
	}
	if st.Limit > 0 && n >= st.Limit {
		return nil
	}
	ended := st
	ended.States, ended.Limit, ended.Last = "DF", 0, recentEnded
	if st.Limit > 0 {
		ended.Last = min(recentEnded, st.Limit-n)
	}
	return client.Stream(c.Context, cl, protocol.OpStat, ended, row)
}
