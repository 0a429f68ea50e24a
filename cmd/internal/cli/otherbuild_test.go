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

// TestWarnOtherBuild: a command talking to a CLS of another build (an
// upgrade not yet followed by a restart, whose CLS ignores options it does
// not know) says so on stderr, once, with the CLS's version escaped; a CLS
// of the same build, or one that does not say, gets no warning.
func TestWarnOtherBuild(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, server, want string
	}{
		{"same build", Version, ""},
		{"says nothing", "", ""},
		{"other build", "v0.9 (0123456789ab, go1.22)", "mqstat: warning: the CLS runs mq v0.9 (0123456789ab, go1.22), this mqstat is mq " + Version + ": restart the CLS (cls serve) after an upgrade; until then it ignores options it does not know\n"},
		{"other build, escaped", "v1\x1b[2J\nx", "the CLS runs mq v1\\x1b[2J\\nx, this"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replies := map[string]clitest.Reply{
				protocol.OpHello.Name:  {Body: protocol.HelloReply{Proto: protocol.Version, Role: protocol.RoleUser, Server: tc.server}},
				protocol.OpStat.Name:   {Body: protocol.StatReply{Jobs: []protocol.JobInfo{}}},
				protocol.OpArrays.Name: {Body: protocol.ArraysReply{}},
			}
			var o, e bytes.Buffer
			env := Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
			if code := Run(context.Background(), Mqstat(env), []string{"mqstat"}); code != 0 {
				t.Fatalf("mqstat: exit %d, %s", code, e.String())
			}
			switch got := e.String(); {
			case tc.want == "" && got != "":
				t.Errorf("stderr %q, want nothing", got)
			case tc.want != "" && (!strings.Contains(got, tc.want) || strings.Count(got, "warning") != 1):
				t.Errorf("stderr %q, want one warning with %q", got, tc.want)
			}
		})
	}
}
