package jobfields

import (
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// FuzzParse: no --format list panics; what Parse accepts gives a header
// and a row of one line each, a column a field.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"id,state", "ID, Target ,finished", "", ",", "jobid,end", "nosuch", "id,,state", "\x00\n"} {
		f.Add(s, "cmd\twith\ttabs\nand lines")
	}
	f.Fuzz(func(t *testing.T, list, command string) {
		fs, err := Parse(list)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("Parse(%q): error of several lines: %q", list, err)
			}
			return
		}
		j := protocol.JobInfo{ID: 7, Target: "t", Command: command, Started: "2026-11-30T23:00:00Z"}
		for _, line := range []string{Header(fs), Row(fs, j, time.Now())} {
			if strings.Count(line, "\n") != 1 || strings.Count(line, "\t") != len(fs)-1 {
				t.Fatalf("Parse(%q), command %q: line %q is not %d columns", list, command, line, len(fs))
			}
		}
	})
}
