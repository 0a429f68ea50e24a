package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// TestMqdelManyListsSample: a delete reply naming only the first of many
// jobs prints those and says how many more there were; a refusal of many
// says how many in all.
func TestMqdelManyListsSample(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name           string
		reply          protocol.ActionReply
		code           int
		stdout, stderr string
	}{
		{"sample", protocol.ActionReply{IDs: []int64{5, 6}, Count: 1_000_000}, 0,
			"deleted job 5\ndeleted job 6\n", "mqdel: deleted 999998 more jobs, not listed (1000000 in all)\n"},
		{"whole", protocol.ActionReply{IDs: []int64{5, 6}}, 0, "deleted job 5\ndeleted job 6\n", ""},
		{"refused", protocol.ActionReply{Errors: []string{"job 5 has already ended (done)"}, ErrorCount: 1_000_000}, ExitFailed,
			"", "mqdel: nothing deleted: job 5 has already ended (done); and 999999 more\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			replies := map[string]clitest.Reply{protocol.OpDelete.Name: {Body: c.reply}}
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			if code := Run(context.Background(), Mqdel(env), []string{"mqdel", "1-1000000"}); code != c.code {
				t.Fatalf("exit %d, want %d; %s", code, c.code, e.String())
			}
			if o.String() != c.stdout || e.String() != c.stderr {
				t.Errorf("stdout %q, stderr %q\nwant %q, %q", o.String(), e.String(), c.stdout, c.stderr)
			}
		})
	}
}
