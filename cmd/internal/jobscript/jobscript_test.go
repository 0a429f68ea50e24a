package jobscript

import (
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"./job.sh"}, "./job.sh"},
		{[]string{"sh", "job.sh"}, "job.sh"},
		{[]string{"bash job.sh a b"}, "job.sh"},
		{[]string{"/bin/bash", "run.sh"}, "run.sh"},
		{[]string{"sh", "-c", "x"}, ""},
		{[]string{"bwa", "mem", "ref.fa"}, "bwa"},
		{nil, ""},
		// Quoted as the job's shell reads them: the script is the file
		// the job runs, spaces and quotes included.
		{[]string{`sh "my job.sh"`}, "my job.sh"},
		{[]string{`bash '/data/My Project/run.sh' x`}, "/data/My Project/run.sh"},
		{[]string{`"./job.sh"`}, "./job.sh"},
		{[]string{`./my\ job.sh`}, "./my job.sh"},
		{[]string{"sh", "my job.sh"}, "my"}, // words joined: the job runs sh my job.sh
		{[]string{`sh "job.sh`}, ""},        // does not split: no script
	} {
		if got := Of(tc.words); got != tc.want {
			t.Errorf("Of(%q) = %q, want %q", tc.words, got, tc.want)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add("#!/bin/sh\n#MQ --time 4:00:00 -c 2\n#SBATCH -c 4\necho\n#MQ -c 8\n")
	f.Add("#MQ -v 'A=1\n")
	f.Add("#MQ\n#MQ\t-H\n#MQX -c 1\n")
	f.Fuzz(func(t *testing.T, script string) {
		h, err := Read(strings.NewReader(script))
		if err != nil {
			return
		}
		last := 0
		for _, l := range h.Lines {
			if l.N <= last {
				t.Fatalf("directive lines out of order: %+v", h.Lines)
			}
			last = l.N
		}
		if len(h.Foreign) > 4 {
			t.Fatalf("foreign prefixes %q", h.Foreign)
		}
	})
}
