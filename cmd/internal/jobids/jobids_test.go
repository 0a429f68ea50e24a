package jobids

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

func TestRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in               string
		first, last      int64
		isRange, wantErr bool
	}{
		{"12", 0, 0, false, false},
		{"3-9", 3, 9, true, false},
		{"9-3", 0, 0, true, true},
		{"0-3", 0, 0, true, true},
		{"3-", 0, 0, true, true},
		{"+3-9", 0, 0, true, true},
		{"3-+9", 0, 0, true, true},
	} {
		f, l, r, err := Range(c.in)
		if f != c.first || l != c.last || r != c.isRange || (err != nil) != c.wantErr {
			t.Errorf("Range(%q) = %d, %d, %v, %v", c.in, f, l, r, err)
		}
	}
}

func TestListDigitsOnly(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"+5", "5,+6", "-0"} {
		if ids, err := List([]string{in}); err == nil {
			t.Errorf("List(%q) = %v, want an error: decimal digits only", in, ids)
		}
	}
	if ids, err := List([]string{"5,06"}); err != nil || !slices.Equal(ids, []int64{5, 6}) {
		t.Errorf("List(5,06) = %v, %v", ids, err)
	}
}

func TestRequests(t *testing.T) {
	t.Parallel()
	ids, err := Ranges([]string{"9", "1-3", "2,4", "12-20", "21"})
	if err != nil {
		t.Fatal(err)
	}
	if want := [][2]int64{{1, 4}, {9, 9}, {12, 21}}; !slices.Equal(ids, want) {
		t.Fatalf("Ranges: %v, want %v", ids, want)
	}
	if ids, err := Ranges([]string{"1-9223372036854775807", "2"}); err != nil || !slices.Equal(ids, [][2]int64{{1, 1<<63 - 1}}) {
		t.Fatalf("Ranges up to the largest id: %v, %v, want one range", ids, err)
	}
	var many [][2]int64
	for i := range int64(2*PerRequest + 1) {
		many = append(many, [2]int64{2*i + 1, 2*i + 1})
	}
	qs := Requests(protocol.Stat{Queue: "q"}, append(many, [2]int64{1e6, 2e6}))
	if len(qs) != 4 || len(qs[0].IDs) != PerRequest || len(qs[2].IDs) != 1 || qs[3].From != 1e6 || qs[3].To != 2e6 || qs[3].Queue != "q" {
		t.Errorf("Requests: %d requests", len(qs))
	}
}

func TestNamedUnknown(t *testing.T) {
	t.Parallel()
	named := Named([]string{"7,3", "10-20", "x", "3"})
	if len(named) != 2 || !named[3] || !named[7] {
		t.Fatalf("Named: %v, want 3 and 7 (no range, no word)", named)
	}
	if got := Unknown(named); got != "jobs 3, 7 do not exist" {
		t.Errorf("Unknown: %q", got)
	}
	if got := Unknown(map[int64]bool{9: true}); got != "job 9 does not exist" {
		t.Errorf("Unknown of one: %q", got)
	}
	many := map[int64]bool{}
	for id := range int64(20000) {
		many[id+1] = true
	}
	if got, want := Unknown(many), "jobs 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20 and 19980 more do not exist"; got != want {
		t.Errorf("Unknown of 20000: %.200q, want %q", got, want)
	}
}

// FuzzRanges: no argument makes the parsers panic, and what Ranges
// accepts is sorted, disjoint ranges of positive ids that Requests
// covers exactly.
func FuzzRanges(f *testing.F) {
	for _, s := range []string{"1", "3-9", "9-3", "1-9999999999", "1-9223372036854775807", "9223372036854775807,1", "+5", "-5", ",,", "0", "1-2-3", "5 6"} {
		f.Add(s, "2")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		args := []string{a, b}
		Range(a)
		List(args)
		Named(args)
		rs, err := Ranges(args)
		if err != nil {
			return
		}
		for i, r := range rs {
			if r[0] < 1 || r[1] < r[0] || i > 0 && r[0] <= rs[i-1][1] {
				t.Fatalf("Ranges(%q) = %v", args, rs)
			}
		}
		var n int
		for _, q := range Requests(protocol.Stat{}, rs) {
			if len(q.IDs) > PerRequest || len(q.IDs) > 0 && q.From != 0 {
				t.Fatalf("Requests(%v): %+v", rs, q)
			}
			n += max(len(q.IDs), int(min(q.From, 1)))
		}
		if n != len(rs) {
			t.Fatalf("Requests(%v) names %d ranges, want %d", rs, n, len(rs))
		}
	})
}

// Spans are the ranges given, not the single ids; overlapping ones are
// merged, ranges that only meet are not (each is said alone).
func TestSpans(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want [][2]int64
	}{
		{[]string{"5"}, nil},
		{[]string{"1", "7-9", "3,4-5"}, [][2]int64{{4, 5}, {7, 9}}},
		{[]string{"7-9", "8-12"}, [][2]int64{{7, 12}}},
		{[]string{"7-9", "10-12"}, [][2]int64{{7, 9}, {10, 12}}},
		{[]string{"x-1"}, nil},
	} {
		if got := Spans(c.args); !slices.Equal(got, c.want) {
			t.Errorf("Spans(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func TestUnknownRanges(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ids    string
		ranges [][2]int64
		want   string
	}{
		{"", [][2]int64{{5, 5}}, "job 5 does not exist"},
		{"job 2 does not exist", [][2]int64{{7, 9}, {20, 30}}, "job 2 does not exist; jobs 7-9 do not exist; jobs 20-30 do not exist"},
	} {
		if got := UnknownRanges(c.ids, c.ranges); got != c.want {
			t.Errorf("UnknownRanges(%q, %v) = %q, want %q", c.ids, c.ranges, got, c.want)
		}
	}
}
