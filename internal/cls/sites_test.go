package cls

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/placeholder/capacity"
	"github.com/mq-hpc/mq/internal/site"
	"github.com/mq-hpc/mq/protocol"
)

// The CLS's own placeholders run the agent as they always have (no
// walltime, no idle timeout, --noop when asked); an on-demand local site's
// get its walltime and idle timeout. Both log to the CLS's log, and bound
// jobs' output as the CLS says (cls serve --max-output, --output-reserve).
// Each says what it holds: the site's cores and GPUs (none), and for the
// CLS's own an equal share of this machine's memory.
func TestLocalAgentCommand(t *testing.T) {
	var logw bytes.Buffer
	s := &sites{home: "/mq", noop: true, agentLog: &logw, umask: 0o022, maxOutput: 1 << 30, outputReserve: 5 << 20}
	host, _ := os.Hostname()
	machine := capacity.Detect(os.Getenv, os.DirFS("/"), nil).Mem
	if machine == 0 {
		t.Skip("this machine's memory is not known")
	}
	share := func(n int64) string { return " --mem " + site.MemArg(machine/n) }
	for _, tc := range []struct {
		spec protocol.SiteSpec
		want string
	}{
		{protocol.SiteSpec{Name: "local", Type: "local", Min: 2, Max: 2, Slots: 4, Embedded: true},
			"agent --site local --host " + host + " --slots 4 --gpus 0" + share(2) + " --out /mq/output --orphan-exit --umask 022 --max-output 1073741824 --output-reserve 5242880 --noop"},
		{protocol.SiteSpec{Name: "here", Type: "local", Max: 2, Slots: 1, Walltime: 3600, Idle: 60},
			"agent --site here --host " + host + " --slots 1 --gpus 0 --walltime 57m0s --idle 1m0s --out /mq/output --orphan-exit --umask 022 --max-output 1073741824 --output-reserve 5242880"},
		{protocol.SiteSpec{Name: "json", Type: "local", Max: 1, Slots: 1, Embedded: true},
			"agent --site json --host " + host + " --slots 1 --gpus 0" + share(1) + " --out /mq/output --orphan-exit --umask 022 --max-output 1073741824 --output-reserve 5242880 --noop --log-format json"},
	} {
		s.logJSON = tc.spec.Name == "json" // cls serve --log-format json
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

// A local site's placeholders write stream files (--streams) when the
// site says so or, saying nothing, when the CLS does (cls serve
// --output); otherwise they hear files when they register.
func TestLocalAgentOutputMode(t *testing.T) {
	for _, tc := range []struct {
		clsStreams bool
		output     string
		want       bool
	}{
		{true, "", true},
		{false, "", false},
		{true, protocol.OutputModeFiles, false},
		{false, protocol.OutputModeStreams, true},
		{true, protocol.OutputModeStreams, true},
	} {
		s := &sites{home: "/mq", streams: tc.clsStreams, agentExe: "/bin/cls"}
		st, err := s.open(protocol.SiteSpec{Name: "here", Type: "local", Max: 1, Slots: 1, Walltime: 3600, Idle: 60, Output: tc.output}, nil)
		if err != nil {
			t.Fatal(err)
		}
		args := st.(*site.Processes).Command().Args
		if got := slices.Contains(args, "--streams"); got != tc.want {
			t.Errorf("cls streams %v, site output %q: --streams %v, want %v (%v)", tc.clsStreams, tc.output, got, tc.want, args)
		}
	}
}

// cls site list shows the data root a remote site without --data-root
// gets (.mq-data/CLSID with this CLS's id), not a placeholder for it.
func TestSiteListDataRoot(t *testing.T) {
	s := &sites{clsID: "a1b2c3"}
	list := s.shown([]protocol.SiteInfo{
		{SiteSpec: protocol.SiteSpec{Name: "local", Type: site.Local}},
		{SiteSpec: protocol.SiteSpec{Name: "c", Type: site.Slurm}},
		{SiteSpec: protocol.SiteSpec{Name: "own", Type: site.SGE, DataRoot: "/scratch/me/mq"}},
		{SiteSpec: protocol.SiteSpec{Name: "shared", Type: site.PBS, SharedFS: true}},
	})
	for i, want := range []string{"", ".mq-data/a1b2c3", "/scratch/me/mq", ""} {
		if got := list[i].DataRoot; got != want {
			t.Errorf("site %s: data root %q, want %q", list[i].Name, got, want)
		}
	}
}
