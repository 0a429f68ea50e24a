// Package jobids reads the job ids and ranges users give the commands
// (mqstat 501 600-610, mqdel 5,6, mqwait 1-1000) as qstat, qdel and
// scancel take them, and splits a listing by ids into requests.
package jobids

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/protocol"
)

// PerRequest is how many single ids one listing request names (the CLS
// takes up to 10,000).
const PerRequest = 1000

// Range parses FIRST-LAST; isRange is false for anything without a dash
// (a job id).
func Range(s string) (first, last int64, isRange bool, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, false, nil
	}
	first, err1 := parseID(a)
	last, err2 := parseID(b)
	if err1 != nil || err2 != nil || first <= 0 || last < first {
		return 0, 0, true, fmt.Errorf("%q is not a range of job ids FIRST-LAST", s)
	}
	return first, last, true, nil
}

// parseID reads a job id of decimal digits: not strconv's sign (+5,
// -0), which no id is written with.
func parseID(s string) (int64, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, fmt.Errorf("%q is not a job id", s)
	}
	return strconv.ParseInt(s, 10, 64)
}

// List reads job ids, space- or comma-separated: decimal digits only.
func List(args []string) ([]int64, error) {
	var ids []int64
	for _, a := range args {
		for _, p := range strings.Split(a, ",") {
			if p == "" {
				continue
			}
			id, err := parseID(p)
			if err != nil || id <= 0 {
				return nil, fmt.Errorf("%q is not a job id", p)
			}
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Ranges reads the job ids and ranges FIRST-LAST given to a listing,
// space- or comma-separated as List reads them, sorted and merged where
// they meet; nil for none.
func Ranges(args []string) ([][2]int64, error) {
	var rs [][2]int64
	for _, a := range args {
		for _, p := range strings.Split(a, ",") {
			first, last, isRange, err := Range(p)
			switch {
			case err != nil:
				return nil, err
			case !isRange:
				ids, err := List([]string{p})
				if err != nil {
					return nil, fmt.Errorf("%q is not a job id or a range FIRST-LAST (-j ID shows one job in full)", p)
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
		return nil, fmt.Errorf("no job id in %q", strings.Join(args, " "))
	}
	slices.SortFunc(rs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var merged [][2]int64
	for _, r := range rs {
		// r[0]-1, not last+1: a last of math.MaxInt64 (1-9223372036854775807)
		// would overflow and leave the ranges after it unmerged, their
		// jobs listed twice.
		if n := len(merged); n > 0 && r[0]-1 <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

// Named is the set of the single job ids in args (not ranges: a range
// may hold ids never given), as a listing says those it did not find.
func Named(args []string) map[int64]bool {
	named := map[int64]bool{}
	for _, a := range args {
		for _, p := range strings.Split(a, ",") {
			if _, _, isRange, _ := Range(p); isRange {
				continue
			}
			if id, err := parseID(p); err == nil {
				named[id] = true
			}
		}
	}
	return named
}

// Spans are the ranges FIRST-LAST in args (not the single ids: Named),
// sorted, those that overlap merged (but not those that only meet: each
// is a range given), as a listing says those no job is in.
func Spans(args []string) [][2]int64 {
	var rs [][2]int64
	for _, a := range args {
		for _, p := range strings.Split(a, ",") {
			if first, last, isRange, err := Range(p); isRange && err == nil {
				rs = append(rs, [2]int64{first, last})
			}
		}
	}
	slices.SortFunc(rs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var merged [][2]int64
	for _, r := range rs {
		if n := len(merged); n > 0 && r[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// Requests are the listing requests of st narrowed to ids (as Ranges
// gives them), in id order: the single ids PerRequest to a request,
// each range as From..To.
func Requests(st protocol.Stat, ids [][2]int64) []protocol.Stat {
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
			if single = append(single, r[0]); len(single) == PerRequest {
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

// RangeUnknown says that no job has an id in first..last.
func RangeUnknown(first, last int64) string {
	if first == last {
		return fmt.Sprintf("job %d does not exist", first)
	}
	return fmt.Sprintf("jobs %d-%d do not exist", first, last)
}

// maxUnknownRanges is how many ranges without a job UnknownRanges names.
const maxUnknownRanges = 20

// UnknownRanges says that no job is in the ranges given, after ids, the
// unknown single ids as Unknown says them ("" for none).
func UnknownRanges(ids string, ranges [][2]int64) string {
	var msgs []string
	if ids != "" {
		msgs = append(msgs, ids)
	}
	for i, r := range ranges {
		if i == maxUnknownRanges {
			msgs = append(msgs, fmt.Sprintf("and %d more ranges", len(ranges)-i))
			break
		}
		msgs = append(msgs, RangeUnknown(r[0], r[1]))
	}
	return strings.Join(msgs, "; ")
}

// maxUnknown is how many unknown ids Unknown names; the rest are
// counted, as refusals name 20 culprits (mqstat $(seq 20000) printed a
// line of every id).
const maxUnknown = 20

// Unknown says that the job ids named do not exist, as mqdel and mqstat
// -j say it of one: the first maxUnknown, and how many more.
func Unknown(named map[int64]bool) string {
	ids := slices.Sorted(maps.Keys(named))
	s := make([]string, min(len(ids), maxUnknown))
	for i := range s {
		s[i] = strconv.FormatInt(ids[i], 10)
	}
	if len(ids) == 1 {
		return fmt.Sprintf("job %s does not exist", s[0])
	}
	list := strings.Join(s, ", ")
	if more := len(ids) - len(s); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("jobs %s do not exist", list)
}
