package protocol

import (
	"strings"
	"testing"
)

// TestJobFileStdio: a job file's "stdout" and "stderr" reach the job's
// environment, where they travel; a bad pattern names its line.
func TestJobFileStdio(t *testing.T) {
	t.Parallel()
	in := `{"target":"t","command":"true","stdout":"o-%j.log","stderr":"e.log"}` + "\n" +
		`{"target":"t","command":"true","stdout":"x-%q"}` + "\n"
	var got []JobSpec
	err := ReadJobFile(strings.NewReader(in), JobSpec{Cwd: "/w"}, func(line int, js JobSpec) error {
		got = append(got, js)
		return nil
	})
	if len(got) != 1 || got[0].Env[EnvStdout] != "o-%j.log" || got[0].Env[EnvStderr] != "e.log" || got[0].Stdout != "" {
		t.Fatalf("got %+v", got)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "line 2: stdout: ") {
		t.Errorf("bad pattern: %v", err)
	}
}

// TestStdioVariables: SGE expands $JOB_ID, $TASK_ID, $HOME in -o paths;
// mq does not, so such a pattern is refused rather than written as a file
// of that name that every job of an array overwrites.
func TestStdioVariables(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ p, name string }{
		{"o.$JOB_ID", "JOB_ID"},
		{"logs/${TASK_ID}.out", "TASK_ID"},
		{"$HOME/x.log", "HOME"},
		{"a$1/$PBS_ARRAYID", "PBS_ARRAYID"},
		{"price$5.log", ""},
		{"cost$", ""},
		{"run-%A_%a.out", ""},
	} {
		err := CheckStdioPattern(tc.p)
		if tc.name == "" {
			if err != nil {
				t.Errorf("CheckStdioPattern(%q) = %v, want nil", tc.p, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "mq does not expand $"+tc.name+";") || strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckStdioPattern(%q) = %v, want one line naming $%s", tc.p, err, tc.name)
		}
	}
}
