package clscmd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	mqcli "github.com/mq-hpc/mq/internal/cli"
	"github.com/mq-hpc/mq/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
	"github.com/mq-hpc/mq/site"
)

// cls site add checks its settings before it reaches the CLS: a bad one is
// a usage error (exit 2) naming the flag, and no connection is made.
func TestSiteAddRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"a", "--type", "sge", "--ssh", "u@h", "--slots", "4", "--pe", "a b"}, `--pe "a b"`},
		{[]string{"a", "--type", "slurm", "--ssh", "u@h", "--slots", "4", "--pe", "smp"}, "--pe is only for sge"},
		{[]string{"a", "--type", "sge", "--ssh", "u@h", "--pe", "smp"}, "--pe needs --slots > 1"},
		{[]string{"local", "--type", "local"}, "reserved for the CLS's own placeholders (cls serve --local N)"},
	} {
		var out, errOut bytes.Buffer
		dialled := false
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd,
			Dial: func(context.Context) (io.ReadWriteCloser, error) {
				dialled = true
				return nil, errors.New("no CLS in this test")
			}}
		code := mqcli.Main(context.Background(), Cls(env), append([]string{"cls", "site", "add"}, tc.args...))
		if code != 2 || !strings.Contains(errOut.String(), tc.want) || strings.Count(errOut.String(), "\n") != 1 || dialled {
			t.Errorf("cls site add %s: exit %d, stderr %q, dialled %v; want exit 2 and one line with %q",
				strings.Join(tc.args, " "), code, errOut.String(), dialled, tc.want)
		}
	}
}

// cls site list says where the CLS's own site comes from.
func TestPrintSitesEmbedded(t *testing.T) {
	var b bytes.Buffer
	printSites(&b, []protocol.SiteInfo{
		{SiteSpec: protocol.SiteSpec{Name: "local", Type: "local", Min: 4, Max: 4, Slots: 1, Embedded: true}, Running: 4, Connected: 4, State: "ok"},
		{SiteSpec: protocol.SiteSpec{Name: "here", Type: "local", Max: 2, Slots: 1}, State: "ok"},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "4-4") || !strings.HasSuffix(lines[1], "this host (cls serve --local 4)") ||
		!strings.HasSuffix(lines[2], "this host") {
		t.Errorf("cls site list:\n%s", b.String())
	}
}

// The CLS's own placeholders run the agent as they always have (no
// walltime, no idle timeout, --noop when asked); an on-demand local site's
// get its walltime and idle timeout. Both log to the CLS's log.
func TestLocalAgentCommand(t *testing.T) {
	var logw bytes.Buffer
	s := &sites{home: "/mq", noop: true, agentLog: &logw, umask: 0o022}
	host, _ := os.Hostname()
	for _, tc := range []struct {
		spec protocol.SiteSpec
		want string
	}{
		{protocol.SiteSpec{Name: "local", Type: "local", Min: 2, Max: 2, Slots: 4, Embedded: true},
			"agent --site local --host " + host + " --slots 4 --out /mq/output --orphan-exit --umask 022 --noop"},
		{protocol.SiteSpec{Name: "here", Type: "local", Max: 2, Slots: 1, Walltime: 3600, Idle: 60},
			"agent --site here --host " + host + " --slots 1 --walltime 57m0s --idle 1m0s --out /mq/output --orphan-exit --umask 022"},
	} {
		st, err := s.open(tc.spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := st.(*site.Processes)
		if !ok {
			t.Fatalf("%s: a %T, want *site.Processes", tc.spec.Name, st)
		}
		cmd := p.Command()
		if got := strings.Join(cmd.Args[1:], " "); got != tc.want {
			t.Errorf("%s: %s\nwant %s", tc.spec.Name, got, tc.want)
		}
		if cmd.Dir != "/mq" || !slices.Contains(cmd.Env, "MQ_HOME=/mq") || cmd.Stderr != io.Writer(&logw) {
			t.Errorf("%s: dir %q, MQ_HOME set %v, stderr to the log %v", tc.spec.Name, cmd.Dir, slices.Contains(cmd.Env, "MQ_HOME=/mq"), cmd.Stderr == io.Writer(&logw))
		}
	}
}

// cls site list, site remove and queue list escape what the CLS sends.
func TestListsEscapePeerText(t *testing.T) {
	h := clitest.Hostile
	replies := map[string]clitest.Reply{
		protocol.OpSiteList.Name:   {Body: protocol.SiteList{Sites: []protocol.SiteInfo{{SiteSpec: protocol.SiteSpec{Name: h, Type: h, SSH: h}, State: h, Error: h}}}},
		protocol.OpSiteRemove.Name: {Body: protocol.SiteInfo{SiteSpec: protocol.SiteSpec{Name: h}, Error: h}},
		protocol.OpQueueList.Name:  {Body: protocol.QueueList{Queues: []protocol.QueueInfo{{Name: h, Policy: h}}}},
	}
	for _, args := range [][]string{{"cls", "site", "list"}, {"cls", "site", "remove", "x"}, {"cls", "queue", "list"}} {
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
		mqcli.Run(context.Background(), Cls(env), args)
		all := out.String() + errOut.String()
		if bad := clitest.Raw(all); bad != "" || !strings.Contains(all, "evil") {
			t.Errorf("%s: %q reached the output raw (or nothing shown):\n%s", strings.Join(args, " "), bad, all)
		}
	}
}

// A remote site added to a CLS started without --ssh is refused, saying
// what is missing and how to start the CLS; the old message
// ("tunnel: this connection cannot forward ports") named neither.
func TestSiteAddNeedsSSHEndpoint(t *testing.T) {
	for _, connect := range []string{site.Tunnel, site.Direct} {
		s := &sites{home: t.TempDir()}
		err := s.prepare(protocol.SiteSpec{Name: "c", Type: site.Slurm, SSH: "u@h", Connect: connect})
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest ||
			!strings.Contains(err.Error(), "has no SSH endpoint") || !strings.Contains(err.Error(), "cls serve --ssh ADDR") {
			t.Errorf("--connect %s: %v; want a bad request naming the missing endpoint and cls serve --ssh ADDR", connect, err)
		}
		if _, err := os.Stat(s.dir("c")); err == nil {
			t.Errorf("--connect %s: a key was made for a refused site", connect)
		}
	}
}
