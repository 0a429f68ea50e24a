package cli

import (
	"bytes"
	"context"
	"os/user"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// squeue -u $USER and scancel -u $USER out of habit: mqstat -u with the
// user's own name (or uid) lists their jobs, another user's is refused in
// one line; mqdel and the other selecting commands say -u is --all.
func TestUserFlag(t *testing.T) {
	t.Parallel()
	me, err := user.Current()
	if err != nil {
		t.Skip("no current user:", err)
	}
	tb := setup(t)
	ctx := context.Background()
	run := func(app func(Env) *cli.App, args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := Run(ctx, app(tb.env(&o, &e)), args)
		return code, o.String(), e.String()
	}
	if code, _, e := run(Mqsub, "mqsub", "-d", t.TempDir(), "t", "true"); code != 0 {
		t.Fatalf("mqsub: exit %d, %s", code, e)
	}
	for _, u := range []string{me.Username, me.Uid} {
		if code, o, e := run(Mqstat, "mqstat", "-u", u); code != 0 || !strings.Contains(o, "\n1 ") {
			t.Errorf("mqstat -u %s: exit %d, stdout %q, stderr %q; want the job listed", u, code, o, e)
		}
	}
	other := "not-" + me.Username
	if code, o, e := run(Mqstat, "mqstat", "-u", other); code != ExitUsage || o != "" || !strings.Contains(e, "this one is "+me.Username+"'s") || strings.Count(e, "\n") != 1 {
		t.Errorf("mqstat -u %s: exit %d, stdout %q, stderr %q; want exit 2, one line", other, code, o, e)
	}
	if code, o, e := run(Mqstat, "mqstat", "-u", ""); code != ExitUsage || o != "" || e != "mqstat: -u: the user name is empty (a CLS holds only its owner's jobs: -u is not needed) (see mqstat --help)\n" {
		t.Errorf("mqstat -u '': exit %d, stdout %q, stderr %q; want exit 2 saying the name is empty", code, o, e)
	}
	for _, app := range []struct {
		name string
		new  func(Env) *cli.App
	}{{"mqdel", Mqdel}, {"mqhold", Mqhold}, {"mqrls", Mqrls}} {
		if code, o, e := run(app.new, app.name, "-u", me.Username); code != ExitUsage || o != "" || !strings.Contains(e, app.name+" --all") {
			t.Errorf("%s -u %s: exit %d, stdout %q, stderr %q; want exit 2 naming --all", app.name, me.Username, code, o, e)
		}
	}
	if tb.jobs() != 1 {
		t.Errorf("%d jobs, want 1", tb.jobs())
	}
}
