package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
	"github.com/urfave/cli/v2"
)

// TestMqsubTooLongWarned: a job expected to take longer than any
// placeholder or site runs a job (here one placeholder of a 10-minute
// walltime) is added and waits, as no placeholder ever takes it; mqsub
// warns so, mqstat -j says why under "cannot run", and mqalter warns
// while its new time is still too long. One that fits gets no warning.
func TestMqsubTooLongWarned(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	if _, err := tb.store.Register(context.Background(), protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 1, OutDir: "/o", Walltime: 600}); err != nil {
		t.Fatal(err)
	}
	const longest = "the longest a placeholder or site runs a job is 10m0s (a placeholder's --walltime)"
	run := func(app func(Env) *cli.App, args ...string) (string, string) {
		t.Helper()
		var o, e bytes.Buffer
		if code := Run(context.Background(), app(tb.env(&o, &e)), args); code != ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, e.String())
		}
		return o.String(), e.String()
	}
	for _, c := range []struct {
		args []string
		warn string // "" for none
	}{
		{[]string{"--time", "1h", "t", "true"}, "job 1 waits: expected to take 1h0m0s; " + longest},
		{[]string{"--est", "5m", "t", "true"}, ""},
		{[]string{"t", "true"}, ""},
		{[]string{"--array", "1-3", "--est", "20m", "t", "true"}, "jobs 4-6 wait: expected to take 20m0s; " + longest},
	} {
		_, e := run(Mqsub, append([]string{"mqsub"}, c.args...)...)
		switch {
		case c.warn == "" && e != "":
			t.Errorf("%v: stderr %q", c.args, e)
		case c.warn != "" && (!strings.HasPrefix(e, "mqsub: warning: "+c.warn) || strings.Count(e, "\n") != 1):
			t.Errorf("%v: stderr %q, want the one warning %q", c.args, e, c.warn)
		}
	}
	if o, _ := run(Mqstat, "mqstat", "-j", "1"); !strings.Contains(o, "cannot run: expected to take 1h0m0s; "+longest+"\n") {
		t.Errorf("mqstat -j 1:\n%s", o)
	}
	if o, _ := run(Mqstat, "mqstat", "-j", "2"); strings.Contains(o, "cannot run") {
		t.Errorf("mqstat -j 2, a job that fits:\n%s", o)
	}
	if _, e := run(Mqalter, "mqalter", "--time", "30m", "1"); !strings.Contains(e, "expected to take 30m0s; "+longest) {
		t.Errorf("mqalter --time 30m: stderr %q", e)
	}
	if _, e := run(Mqalter, "mqalter", "--time", "9m", "1"); e != "" {
		t.Errorf("mqalter --time 9m: stderr %q", e)
	}
	if o, _ := run(Mqstat, "mqstat", "-j", "1"); strings.Contains(o, "cannot run") {
		t.Errorf("mqstat -j 1 after mqalter --time 9m:\n%s", o)
	}
}
