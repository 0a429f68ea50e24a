package habits

import (
	"strings"
	"testing"
)

// FuzzHints: no value makes a hint panic, a value of one line makes a
// message of one line, and a part of the value left empty is named
// (NAME=1), not left as a gap.
func FuzzHints(f *testing.F) {
	for _, s := range []string{"", "nodes=1:ppn=4,mem=8gb", "select=1:ncpus=4:mem=8gb:ngpus=1", "walltime=01:00:00", "gpu:a100:2,fpga", "matlab:2,", "depend=afterok:1:2", "aftercorr:5", ":", "=", ",", "9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var msgs []string
		for _, h := range hints {
			if h.say != nil {
				msgs = append(msgs, h.say(v))
			}
		}
		msgs = append(msgs, nameHint("nodes", v), nameHint("job-name", v), Dependency(v), qsubWHint(v))
		if strings.ContainsAny(v, "\n\r") {
			return
		}
		for _, m := range msgs {
			if strings.ContainsAny(m, "\n\r") {
				t.Fatalf("value %q: message %q has several lines", v, m)
			}
			if !strings.ContainsAny(v, " =") && (strings.Contains(m, "  ") || strings.Contains(m, " =")) {
				t.Fatalf("value %q: message %q has a value left empty", v, m)
			}
		}
	})
}
