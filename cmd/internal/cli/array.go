package cli

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/protocol"
)

// maxArray bounds a job array's members.
const maxArray = 10_000_000

// arraySpec is a parsed --array FIRST-LAST[:STEP][%LIMIT] (limit 0: no cap).
type arraySpec struct {
	first, last, step int64
	limit             int
}

// len is the number of members. parseArray keeps it within maxArray;
// last-first cannot overflow as 0 <= first <= last.
func (a arraySpec) len() int64 { return (a.last-a.first)/a.step + 1 }

// index is the k-th member's index (0 <= k < len): computed from k, not by
// stepping past last, which overflows near math.MaxInt64.
func (a arraySpec) index(k int64) int64 { return a.first + k*a.step }

// parseArray parses FIRST-LAST[:STEP][%LIMIT] (or a single index N);
// LIMIT, as in Slurm, caps the members executing at once.
func parseArray(s string) (arraySpec, error) {
	a := arraySpec{step: 1}
	s, lim, hasLimit := strings.Cut(s, "%")
	if hasLimit {
		n, err := strconv.Atoi(lim)
		if err != nil || n < 1 || n > 1<<30 {
			return a, Usagef("--array %s%%%s: LIMIT must be a whole number from 1 to %d", s, lim, 1<<30)
		}
		a.limit = n
	}
	rng, step, hasStep := strings.Cut(s, ":")
	lo, hi, isRange := strings.Cut(rng, "-")
	if !isRange {
		hi = lo
	}
	var err1, err2, err3 error
	a.first, err1 = strconv.ParseInt(lo, 10, 64)
	a.last, err2 = strconv.ParseInt(hi, 10, 64)
	if hasStep {
		a.step, err3 = strconv.ParseInt(step, 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil || a.first < 0 || a.last < a.first || a.step <= 0 {
		return a, Usagef("--array %q is not FIRST-LAST[:STEP] (0 <= FIRST <= LAST, STEP >= 1)", s)
	}
	// Compare before adding 1: FIRST-LAST spanning all of int64 would
	// overflow len() to a negative count and slip past the limit.
	if span := (a.last - a.first) / a.step; span >= maxArray {
		return a, Usagef("--array %s has %d members; the limit is %d", s, uint64(span)+1, maxArray)
	}
	return a, nil
}

// mqsubArray submits one job per index of --array in one transaction (the
// bulk path: chunks spooled on the CLS, one commit), each with
// MQ_ARRAY_INDEX set and {} in its command, prerequisite targets,
// target and -o/-e paths replaced by the index, and prints their ids; with -b it waits
// for them all. Members with a target each (align{}) are jobs of one
// submit but no job array: an array is of one target.
func mqsubArray(c *cli.Context, env Env, js protocol.JobSpec, shared map[string]string) error {
	a, err := parseArray(c.String("array"))
	if err != nil {
		return err
	}
	perTarget := strings.Contains(js.Target, "{}")
	if perTarget && a.limit > 0 {
		return Usagef("--array %s: %%LIMIT caps an array of one target, and %s gives each member its own; give them one target, and {} in -p for each member's own prerequisite", c.String("array"), js.Target)
	}
	if _, ok := js.Env["MQ_ARRAY_INDEX"]; ok {
		return Usagef("MQ_ARRAY_INDEX is set by --array")
	}
	if err := protocol.ValidateSpec(&js); err != nil {
		return Usagef("%v", err)
	}
	seq := needsArraySeq(js.Env)
	member := func(k int64) protocol.JobSpec {
		m := js
		idx := strconv.FormatInt(a.index(k), 10)
		m.Command = strings.ReplaceAll(js.Command, "{}", idx)
		m.Target = strings.ReplaceAll(js.Target, "{}", idx)
		m.Prereqs, m.AfterAny = indexed(js.Prereqs, idx), indexed(js.AfterAny, idx)
		m.Env = maps.Clone(js.Env)
		if m.Env == nil {
			m.Env = map[string]string{}
		}
		m.Env["MQ_ARRAY_INDEX"] = idx
		for _, k := range []string{protocol.EnvStdout, protocol.EnvStderr} {
			if p, ok := m.Env[k]; ok && strings.Contains(p, "{}") {
				m.Env[k] = strings.ReplaceAll(p, "{}", idx) // -o 'r{}.log', as %a
			}
		}
		if seq {
			m.Env[protocol.EnvArraySeq] = strconv.FormatInt(k, 10)
		}
		return m
	}
	// The last member has the longest index: {} made into it may make a
	// name or the command too long, which the CLS would refuse as "line
	// N" of a job file.
	last := member(a.len() - 1)
	if err := protocol.ValidateSpec(&last); err != nil {
		return Usagef("--array: member %d: %v", a.index(a.len()-1), err)
	}
	cl, err := Dial(c.Context, env, "mqsub")
	if err != nil {
		return err
	}
	defer cl.Close()
	upload := func(add func(protocol.BulkAdd) error) error {
		const chunk = 2000
		var jobs []protocol.JobSpec
		line := 1
		flush := func() error {
			if len(jobs) == 0 {
				return nil
			}
			if err := add(protocol.BulkAdd{Line: line, Jobs: jobs}); err != nil {
				return err
			}
			line += len(jobs)
			jobs = nil
			return nil
		}
		for k := range a.len() {
			m := member(k)
			protocol.EncodeCommand(&m)
			jobs = append(jobs, m)
			if len(jobs) == chunk {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	}
	commit := protocol.BulkCommit{Token: newToken(), Array: c.String("array"), ArrayLimit: a.limit, Env: shared}
	if perTarget {
		commit.Array = ""
	}
	return submitBulk(c, env, cl, "--array", upload, commit)
}

// indexed is targets with {} in each replaced by idx: a member's own
// prerequisites (-p 'align{}'), as Slurm's aftercorr. targets itself
// when none has {}.
func indexed(targets []string, idx string) []string {
	if !slices.ContainsFunc(targets, func(t string) bool { return strings.Contains(t, "{}") }) {
		return targets
	}
	out := make([]string, len(targets))
	for i, t := range targets {
		out[i] = strings.ReplaceAll(t, "{}", idx)
	}
	return out
}
