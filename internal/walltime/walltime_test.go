package walltime

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want float64
		err  string
	}{
		{"90", 90, ""},
		{"2.5", 2.5, ""},
		{"0", 0, ""},
		{"90s", 90, ""},
		{"1h30m", 5400, ""},
		{"04:00:00", 4 * 3600, ""},
		{"48:00:00", 48 * 3600, ""},
		{"1:02:03", 3723, ""},
		{"30:00", 1800, ""},
		{"90:00", 5400, ""},
		{"1-12:00:00", 36 * 3600, ""},
		{"2-0", 2 * 86400, ""},
		{"1-12", 36 * 3600, ""},
		{"1-12:30", 36*3600 + 1800, ""},
		{"", 0, "empty"},
		{"2x", 0, "not a duration"},
		{"-5", 0, "not 0.."},
		{"-1h", 0, "not a duration"},
		{"1:60", 0, "below 60"},
		{"1:00:60", 0, "below 60"},
		{"1-24:00:00", 0, "below 24"},
		{"1:2:3:4", 0, "not a duration"},
		{"5", 5, ""},
		{"1-", 0, "not a duration"},
		{"-1-1", 0, "not a duration"},
		{":30", 0, "not a duration"},
		{"1-1-1", 0, "not a duration"},
		{"1e10", 0, "not 0.."},
		{"NaN", 0, "not 0.."},
		{"99999999999:00:00", 0, "not a duration"},
		{"9999999999:00:00", 0, "more than"},
		{"+1:00", 0, "not a duration"},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParse: never a panic, never a value out of range, and the clock
// forms agree with their arithmetic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"90", "1h", "04:00:00", "1-12:00:00", "30:00", "2-0", "1-2:3", "x", "1:2:3:4", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			if v != 0 {
				t.Fatalf("Parse(%q) = %v with error %v", s, v, err)
			}
			if strings.ContainsAny(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %q", err)
			}
			return
		}
		if !(v >= 0 && v <= Max) {
			t.Fatalf("Parse(%q) = %v, out of 0..Max", s, v)
		}
		// A whole number of seconds written back as HH:MM:SS reads the same.
		if v == float64(int64(v)) {
			d := time.Duration(v) * time.Second
			h := int64(d / time.Hour)
			m := int64(d % time.Hour / time.Minute)
			sec := int64(d % time.Minute / time.Second)
			back, err := Parse(fmt.Sprintf("%d:%02d:%02d", h, m, sec))
			if err != nil && h < 1e10 {
				t.Fatalf("Parse(%q) = %v, but its clock form: %v", s, v, err)
			}
			if err == nil && back != v {
				t.Fatalf("Parse(%q) = %v, its clock form %v", s, v, back)
			}
		}
	})
}
