package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// mqsub --rerun ID --command CMD sends the new command with the one id;
// other forms are one-line usage errors that send nothing.
func TestMqsubRerunCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		code int
		want string // in the request (code 0) or on stderr
	}{
		{"mend", []string{"mqsub", "--rerun", "7", "--command", "echo fixed"}, 0, `"ids":[7],"atomic":true,"command":"echo fixed"`},
		{"flag first", []string{"mqsub", "--command", "echo fixed", "--rerun", "7"}, 0, `"ids":[7],"atomic":true,"command":"echo fixed"`},
		{"latin-1", []string{"mqsub", "--rerun", "7", "--command", "ls caf\xe9"}, 0, `"command_bytes":"bHMgY2Fm6Q=="`},
		{"two ids", []string{"mqsub", "--rerun", "7", "8", "--command", "true"}, ExitUsage, "--command reruns one job"},
		{"range", []string{"mqsub", "--rerun", "7-9", "--command", "true"}, ExitUsage, "--command reruns one job"},
		{"target", []string{"mqsub", "--rerun", "-t", "f", "--command", "true"}, ExitUsage, "--command reruns one job"},
		{"empty", []string{"mqsub", "--rerun", "7", "--command", ""}, ExitUsage, "--command: the new command is empty"},
		{"without --rerun", []string{"mqsub", "--command", "true", "t", "echo"}, ExitUsage, "--command is only for --rerun"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			seen := ""
			replies := map[string]clitest.Reply{protocol.OpRerun.Name: {Body: protocol.ActionReply{IDs: []int64{7}},
				Seen: func(b json.RawMessage) { seen = string(b) }}}
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			code := Run(context.Background(), Mqsub(env), c.args)
			if code != c.code {
				t.Fatalf("exit %d, want %d; %s", code, c.code, e.String())
			}
			if c.code == 0 {
				if !strings.Contains(seen, c.want) {
					t.Errorf("request %s, want it to hold %s", seen, c.want)
				}
				return
			}
			if seen != "" || !strings.Contains(e.String(), c.want) || strings.Count(strings.TrimSpace(e.String()), "\n") != 0 {
				t.Errorf("sent %q; stderr %q, want one line with %q", seen, e.String(), c.want)
			}
		})
	}
}
