// Package walltime reads the time spans people give mq on command lines
// (ceilings, placeholder walltimes, estimates) in the forms they know:
// seconds ("90"), Go durations ("1h30m") and the batch systems' clock
// forms ("04:00:00", Slurm's "1-12:00:00").
package walltime

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Max is the longest span accepted, in seconds (about 31 years; a
// time.Duration holds about 292).
const Max = 1e9

// Parse reads s as seconds:
//
//	90, 2.5            seconds (a bare number is seconds, as PBS reads it,
//	                   not minutes as Slurm does)
//	90s, 1h30m         a Go duration
//	MM:SS, HH:MM:SS    clock forms (PBS, Slurm)
//	D-HH, D-HH:MM, D-HH:MM:SS   Slurm's forms with days
//
// Fields of clock forms are whole numbers; all but the first are below 60
// (hours below 24 after a day count). The result is 0..Max.
func Parse(s string) (float64, error) {
	if s == "" {
		return 0, fmt.Errorf("empty time span (e.g. 90, 90s, 2h, 04:00:00, 1-12:00:00)")
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if !(f >= 0 && f <= Max) { // also NaN
			return 0, fmt.Errorf("%q is not 0..%g seconds (about 31 years)", s, float64(Max))
		}
		return f, nil
	}
	if strings.ContainsAny(s, ":-") && strings.Trim(s, "0123456789:-") == "" && s[0] != '-' {
		return clock(s)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (e.g. 90, 90s, 2h, 04:00:00, 1-12:00:00)", s)
	}
	if d.Seconds() > Max {
		return 0, fmt.Errorf("%q is more than %g seconds (about 31 years)", s, float64(Max))
	}
	return d.Seconds(), nil
}

// clock reads the colon forms, with or without Slurm's "D-".
func clock(s string) (float64, error) {
	bad := fmt.Errorf("%q is not a duration: use HH:MM:SS, MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (or 90, 90s, 2h)", s)
	days := uint64(0)
	rest := s
	hasDays := false
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := number(d)
		if err != nil {
			return 0, bad
		}
		days, rest, hasDays = n, r, true
	}
	parts := strings.Split(rest, ":")
	var fields []uint64
	for _, p := range parts {
		n, err := number(p)
		if err != nil {
			return 0, bad
		}
		fields = append(fields, n)
	}
	// The first field is unbounded (48:00:00, 90:00), except hours after
	// days; the others are below 60.
	for i, n := range fields {
		if i > 0 && n >= 60 {
			return 0, fmt.Errorf("%q: minutes and seconds must be below 60", s)
		}
	}
	var h, m, sec uint64
	switch {
	case hasDays && len(fields) <= 3:
		h = fields[0]
		if len(fields) > 1 {
			m = fields[1]
		}
		if len(fields) > 2 {
			sec = fields[2]
		}
		if h >= 24 {
			return 0, fmt.Errorf("%q: hours after days must be below 24", s)
		}
	case len(fields) == 2:
		m, sec = fields[0], fields[1]
	case len(fields) == 3:
		h, m, sec = fields[0], fields[1], fields[2]
	default:
		return 0, bad
	}
	total := float64(days)*86400 + float64(h)*3600 + float64(m)*60 + float64(sec)
	if total > Max || math.IsInf(total, 0) {
		return 0, fmt.Errorf("%q is more than %g seconds (about 31 years)", s, float64(Max))
	}
	return total, nil
}

// number is a run of 1..10 decimal digits.
func number(s string) (uint64, error) {
	if s == "" || len(s) > 10 {
		return 0, strconv.ErrSyntax
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseUint(s, 10, 64)
}
