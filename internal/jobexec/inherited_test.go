package jobexec

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// inheritedHelper, set in a child of the test binary, makes it run a job
// that looks for the descriptor the test passed it (fd 3), after
// KeepInherited when the value is "keep", and exit with the job's status.
const inheritedHelper = "MQ_JOBEXEC_INHERITED_HELPER"

func TestMain(m *testing.M) {
	if v := os.Getenv(inheritedHelper); v != "" {
		if v == "keep" {
			KeepInherited()
		}
		err := Shell("test -e /proc/$$/fd/3 || test -e /dev/fd/3", []string{"PATH=/usr/bin:/bin"}).Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			os.Exit(0)
		case errors.As(err, &ee):
			os.Exit(ee.ExitCode())
		}
		os.Exit(99)
	}
	os.Exit(m.Run())
}

// TestKeepInherited: a descriptor the agent's process inherited (here a
// pipe its parent left open as fd 3) reaches no job once KeepInherited
// ran; without it every job has it.
func TestKeepInherited(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode    string
		visible bool
	}{{"keep", false}, {"inherit", true}} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), inheritedHelper+"="+tc.mode)
		cmd.ExtraFiles = []*os.File{w}
		err = cmd.Run()
		r.Close()
		w.Close()
		var ee *exec.ExitError
		switch {
		case err == nil && !tc.visible:
			t.Errorf("%s: the job had the descriptor the agent inherited", tc.mode)
		case err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 1 || tc.visible):
			t.Errorf("%s: %v, want the descriptor %s", tc.mode, err, map[bool]string{true: "seen", false: "not seen (exit 1)"}[tc.visible])
		}
	}
}
