package arrayspec

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

func TestParseArray(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want Spec
		n    int64
		bad  bool
	}{
		{in: "1-1000", want: Spec{1, 1000, 1, 0}, n: 1000},
		{in: "0-99:10", want: Spec{0, 99, 10, 0}, n: 10},
		{in: "7", want: Spec{7, 7, 1, 0}, n: 1},
		{in: "1-10%2", want: Spec{1, 10, 1, 2}, n: 10},
		{in: "0-99:10%3", want: Spec{0, 99, 10, 3}, n: 10},
		{in: "5-1", bad: true},
		{in: "1-10%0", bad: true},
		{in: "1-10%", bad: true},
		{in: "1-10%x", bad: true},
		{in: "1-10%2%3", bad: true},
		{in: "1-3:0", bad: true},
		{in: "-1-3", bad: true},
		{in: "a-b", bad: true},
		{in: "+1-3", bad: true},
		{in: "1-+3", bad: true},
		{in: "1-3:+1", bad: true},
		{in: "0-99999999999", bad: true},
		// Spans of all of int64 once overflowed len() past the limit.
		{in: "0-9223372036854775807", bad: true},
		{in: "1-9223372036854775807:2", bad: true},
		{in: "0-9223372036854775808", bad: true},
		{in: "9223372036854775800-9223372036854775807:5", want: Spec{9223372036854775800, 9223372036854775807, 5, 0}, n: 2},
		{in: "0-9999999", want: Spec{0, 9999999, 1, 0}, n: 10_000_000},
		{in: "0-10000000", bad: true},
	} {
		got, err := Parse(c.in)
		if (err != nil) != c.bad {
			t.Errorf("Parse(%q) error %v, want bad %v", c.in, err, c.bad)
			continue
		}
		if !c.bad && (got != c.want || got.Len() != c.n) {
			t.Errorf("Parse(%q) = %+v (%d), want %+v (%d)", c.in, got, got.Len(), c.want, c.n)
		}
	}
}

// FuzzParseArray checks that an accepted --array has between 1 and Max
// members, all within FIRST-LAST, and that the last member is computed
// without overflow.
func FuzzParseArray(f *testing.F) {
	for _, s := range []string{"1-1000", "0-99:10%3", "7", "0-9223372036854775807", "9223372036854775800-9223372036854775807:5", "1-9223372036854775807:2", "-1-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Parse(s)
		if err != nil {
			return
		}
		n := a.Len()
		if n < 1 || n > Max {
			t.Fatalf("Parse(%q) has %d members", s, n)
		}
		if first, last := a.Index(0), a.Index(n-1); first != a.First || last < first || last > a.Last || a.Last-last >= a.Step {
			t.Fatalf("Parse(%q) = %+v: members %d..%d", s, a, first, last)
		}
	})
}

func TestMember(t *testing.T) {
	t.Parallel()
	size := int64(10)
	js := protocol.JobSpec{
		Target: "align{}", Command: "bwa r{}.fq", Prereqs: []string{"index", "trim{}"}, AfterAny: []string{"qc"},
		Inputs:  []protocol.File{{Path: "ref.fa"}, {Path: "r{}.fq", Size: &size}},
		Outputs: []protocol.File{{Path: "out/r{}.sam"}},
		Env:     map[string]string{protocol.EnvStdout: "log/{}.out", "X": "{}"},
	}
	m := Member(js, "7")
	for _, c := range []struct{ what, got, want string }{
		{"target", m.Target, "align7"},
		{"command", m.Command, "bwa r7.fq"},
		{"prereqs", fmt.Sprint(m.Prereqs), "[index trim7]"},
		{"after-any", fmt.Sprint(m.AfterAny), "[qc]"},
		{"input", m.Inputs[1].Path, "r7.fq"},
		{"input size", fmt.Sprint(*m.Inputs[1].Size), "10"},
		{"output", m.Outputs[0].Path, "out/r7.sam"},
		{"-o", m.Env[protocol.EnvStdout], "log/7.out"},
		{"MQ_ARRAY_INDEX", m.Env["MQ_ARRAY_INDEX"], "7"},
		{"another variable", m.Env["X"], "{}"}, // the job's own environment is its own
		{"template's input", js.Inputs[1].Path, "r{}.fq"},
		{"template's -o", js.Env[protocol.EnvStdout], "log/{}.out"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
	}
	if _, ok := js.Env["MQ_ARRAY_INDEX"]; ok {
		t.Error("Member set MQ_ARRAY_INDEX in the template's environment")
	}
}

func ExampleMember() {
	a, err := Parse("1-3")
	if err != nil {
		fmt.Println(err)
		return
	}
	js := protocol.JobSpec{Target: "align", Command: "bwa mem ref.fa r{}.fq", Inputs: []protocol.File{{Path: "r{}.fq"}}}
	for k := range a.Len() {
		m := Member(js, strconv.FormatInt(a.Index(k), 10))
		fmt.Println(m.Command, m.Inputs[0].Path)
	}
	// Output:
	// bwa mem ref.fa r1.fq r1.fq
	// bwa mem ref.fa r2.fq r2.fq
	// bwa mem ref.fa r3.fq r3.fq
}
