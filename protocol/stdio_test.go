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
