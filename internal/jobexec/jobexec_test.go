package jobexec

import (
	"strings"
	"testing"
)

func TestCommand(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	tests := []struct {
		line   string
		env    []string
		direct bool
		args   []string
	}{
		{"sleep 0.02", env, true, []string{"sleep", "0.02"}},
		{"'sleep' '0.02'", env, true, []string{"sleep", "0.02"}},
		{"/bin/sleep 1", nil, true, []string{"/bin/sleep", "1"}},
		{"./x a", nil, true, []string{"./x", "a"}},
		{"sleep 1", nil, false, nil},                                                 // no PATH: the shell's default
		{"sleep 1", []string{"PATH=bin:/usr/bin"}, false, nil},                       // relative entry
		{"sleep 1", []string{"PATH=/usr/bin", "BASH_FUNC_sleep%%=() {"}, false, nil}, // exported function
		{"no-such-program-mq x", env, false, nil},                                    // the shell says "not found"
		{"echo hi", env, false, nil},
		{"sleep 1; true", env, false, nil},
		{"sleep $T", env, false, nil},
	}
	for _, tt := range tests {
		cmd, direct := Command(tt.line, tt.env, "")
		if direct != tt.direct {
			t.Errorf("%q: direct %v, want %v", tt.line, direct, tt.direct)
			continue
		}
		if !direct {
			if cmd.Path != "/bin/sh" || len(cmd.Args) != 3 || cmd.Args[2] != tt.line {
				t.Errorf("%q: %s %q, want /bin/sh -c LINE", tt.line, cmd.Path, cmd.Args)
			}
			continue
		}
		if strings.Join(cmd.Args, "\x00") != strings.Join(tt.args, "\x00") {
			t.Errorf("%q: args %q, want %q", tt.line, cmd.Args, tt.args)
		}
	}
}
