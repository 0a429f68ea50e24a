// Package arrayspec is mqsub --array: the FIRST-LAST[:STEP][%LIMIT] it
// takes, and the job one index makes of the command line's, with {}
// replaced by the index wherever a member needs its own name.
package arrayspec

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/protocol"
)

// Max bounds an array's members.
const Max = 10_000_000

// Spec is a parsed FIRST-LAST[:STEP][%LIMIT] (Limit 0: no cap).
type Spec struct {
	First, Last, Step int64
	Limit             int
}

// Len is the number of members. Parse keeps it within Max; Last-First
// cannot overflow as 0 <= First <= Last.
func (a Spec) Len() int64 { return (a.Last-a.First)/a.Step + 1 }

// Index is the k-th member's index (0 <= k < Len): computed from k, not
// by stepping past Last, which overflows near math.MaxInt64.
func (a Spec) Index(k int64) int64 { return a.First + k*a.Step }

// Parse parses FIRST-LAST[:STEP][%LIMIT] (or a single index N); LIMIT,
// as in Slurm, caps the members executing at once.
func Parse(s string) (Spec, error) {
	a := Spec{Step: 1}
	s, lim, hasLimit := strings.Cut(s, "%")
	if hasLimit {
		n, err := strconv.Atoi(lim)
		if err != nil || n < 1 || n > 1<<30 {
			return a, fmt.Errorf("--array %s%%%s: LIMIT must be a whole number from 1 to %d", s, lim, 1<<30)
		}
		a.Limit = n
	}
	rng, step, hasStep := strings.Cut(s, ":")
	lo, hi, isRange := strings.Cut(rng, "-")
	if !isRange {
		hi = lo
	}
	var err1, err2, err3 error
	a.First, err1 = strconv.ParseInt(lo, 10, 64)
	a.Last, err2 = strconv.ParseInt(hi, 10, 64)
	if hasStep {
		a.Step, err3 = strconv.ParseInt(step, 10, 64)
	}
	// ParseInt takes a sign; an index is digits, as a job id is.
	if err1 != nil || err2 != nil || err3 != nil || strings.Contains(s, "+") || a.First < 0 || a.Last < a.First || a.Step <= 0 {
		return a, fmt.Errorf("--array %q is not FIRST-LAST[:STEP] (0 <= FIRST <= LAST, STEP >= 1)", s)
	}
	// Compare before adding 1: FIRST-LAST spanning all of int64 would
	// overflow Len to a negative count and slip past the limit.
	if span := (a.Last - a.First) / a.Step; span >= Max {
		return a, fmt.Errorf("--array %s has %d members; the limit is %d", s, uint64(span)+1, Max)
	}
	return a, nil
}

// Member is the job of index idx: js with MQ_ARRAY_INDEX set and {}
// replaced by idx in its command, target, prerequisite targets (-p
// 'align{}': each member waits for its own, as Slurm's aftercorr), -o/-e
// paths (as Slurm's %a) and declared files (--in 'r{}.fq'). js is not
// changed.
func Member(js protocol.JobSpec, idx string) protocol.JobSpec {
	m := js
	m.Command = strings.ReplaceAll(js.Command, "{}", idx)
	m.Target = strings.ReplaceAll(js.Target, "{}", idx)
	m.Prereqs, m.AfterAny = indexed(js.Prereqs, idx), indexed(js.AfterAny, idx)
	m.Inputs, m.Outputs = indexedFiles(js.Inputs, idx), indexedFiles(js.Outputs, idx)
	m.Env = maps.Clone(js.Env)
	if m.Env == nil {
		m.Env = map[string]string{}
	}
	m.Env["MQ_ARRAY_INDEX"] = idx
	for _, k := range []string{protocol.EnvStdout, protocol.EnvStderr} {
		if p, ok := m.Env[k]; ok {
			m.Env[k] = strings.ReplaceAll(p, "{}", idx)
		}
	}
	return m
}

// indexed is targets with {} in each replaced by idx; targets itself
// when none has {}, as most arrays share their prerequisites.
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

// indexedFiles is files with {} in each path replaced by idx; the CLS
// sizes each member's own files as it takes them.
func indexedFiles(files []protocol.File, idx string) []protocol.File {
	if !slices.ContainsFunc(files, func(f protocol.File) bool { return strings.Contains(f.Path, "{}") }) {
		return files
	}
	out := slices.Clone(files)
	for i := range out {
		out[i].Path = strings.ReplaceAll(out[i].Path, "{}", idx)
	}
	return out
}
