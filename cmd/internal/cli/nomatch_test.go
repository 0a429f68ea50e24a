package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/protocol"
)

// clsPurge is cls purge as the cls command runs it.
func clsPurge(env Env) *cli.App {
	app := NewApp("cls", "", env)
	app.Commands = []*cli.Command{Purge(env)}
	return app
}

// A range or selection that matches no job is never silent: a range no
// job is in is unknown ids (exit 1, as ids named are), a selection that
// matches nothing is said in one line on stderr (exit 0, as scancel
// --name and squeue -n exit; -Q keeps it quiet), and a target or queue
// no job ever had is refused as before. Jobs 1 and 2 of target a are
// queued, 3 of target b deleted, 4 and 5 deleted and purged, and no job
// has an id past 5.
func TestNothingMatched(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	var specs []protocol.JobSpec
	for _, target := range []string{"a", "a", "b", "c", "c"} {
		specs = append(specs, protocol.JobSpec{Target: target, Command: "true", Cwd: "/tmp"})
	}
	if _, err := tb.store.Submit(ctx, specs); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.store.Delete(ctx, protocol.Select{IDs: []int64{3, 4, 5}}); err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	if code := Run(ctx, clsPurge(tb.env(&o, &e)), []string{"cls", "purge", "--ended-before", "0", "4-5"}); code != 0 || !strings.HasPrefix(o.String(), "purged 2 jobs") {
		t.Fatalf("cls purge 4-5: exit %d, %s%s", code, o.String(), e.String())
	}
	for _, tc := range []struct {
		app    func(Env) *cli.App
		args   []string
		code   int
		stderr string
	}{
		{Mqdel, []string{"mqdel", "50-60"}, 1, "mqdel: nothing deleted: jobs 50-60 do not exist\n"},
		{Mqdel, []string{"mqdel", "-Q", "4-5"}, 1, "mqdel: nothing deleted: jobs 4-5 do not exist\n"},
		{Mqdel, []string{"mqdel", "3-5"}, 0, "mqdel: nothing deleted: no job of 3-5 is waiting, queued, held, executing or blocked\n"},
		{Mqdel, []string{"mqdel", "-t", "a", "-s", "H"}, 0, "mqdel: nothing deleted: no job of -t a is held\n"},
		{Mqdel, []string{"mqdel", "-Q", "-t", "a", "-s", "H"}, 0, ""},
		{Mqdel, []string{"mqdel", "-t", "a,b", "-s", "HE"}, 0, "mqdel: nothing deleted: no job of -t a,b is held or executing\n"},
		{Mqdel, []string{"mqdel", "-q", "default", "-s", "B"}, 0, "mqdel: nothing deleted: no job of -q default is blocked\n"},
		{Mqdel, []string{"mqdel", "-t", "nosuch"}, 1, "mqdel: target nosuch does not exist\n"},
		{Mqhold, []string{"mqhold", "--all", "-s", "W"}, 0, "mqhold: nothing held: no job is waiting\n"},
		{Mqhold, []string{"mqhold", "50-60"}, 1, "mqhold: nothing held: jobs 50-60 do not exist\n"},
		{Mqrls, []string{"mqrls", "--all"}, 0, "mqrls: nothing released: no job is held\n"},
		{Mqrls, []string{"mqrls", "-t", "a"}, 0, "mqrls: nothing released: no job of -t a is held\n"},
		{Mqrls, []string{"mqrls", "1-3"}, 0, "mqrls: nothing released: no job of 1-3 is held\n"},
		{Mqrls, []string{"mqrls", "4-4"}, 1, "mqrls: nothing released: job 4 does not exist\n"},
		{Mqalter, []string{"mqalter", "--priority", "1", "-t", "b"}, 0, "mqalter: nothing changed: no job of -t b is waiting, queued or held\n"},
		{Mqalter, []string{"mqalter", "--priority", "1", "50-60"}, 1, "mqalter: nothing changed: jobs 50-60 do not exist\n"},
		{Mqsub, []string{"mqsub", "--rerun", "-t", "a"}, 0, "mqsub: nothing rerun: no job of -t a is done, failed or deleted\n"},
		{Mqsub, []string{"mqsub", "--rerun", "--all", "-s", "F"}, 0, "mqsub: nothing rerun: no job is failed\n"},
		{Mqsub, []string{"mqsub", "--rerun", "4-5"}, 1, "mqsub: nothing rerun: jobs 4-5 do not exist\n"},
		{Mqwait, []string{"mqwait", "-Q", "4-5"}, 1, "mqwait: jobs 4-5 do not exist\n"},
		{Mqwait, []string{"mqwait", "-Q", "-t", "b"}, 0, ""},
		{Mqwait, []string{"mqwait", "--target-prefix", "zz"}, 0, "mqwait: nothing to wait for: no job whose target starts with zz (deleted ones do not count)\n"},
		{Mqwait, []string{"mqwait", "-q", "default", "--target-prefix", "b"}, 0, "mqwait: nothing to wait for: no job of -q default whose target starts with b (deleted ones do not count)\n"},
		{clsPurge, []string{"cls", "purge", "--ended-before", "0", "-t", "a"}, 0, "cls: nothing purged: no job of -t a is done, failed or deleted with --ended-before 0\n"},
		{clsPurge, []string{"cls", "purge", "--ended-before", "0", "4-5"}, 1, "cls: nothing purged: jobs 4-5 do not exist\n"},
		{clsPurge, []string{"cls", "purge", "--ended-before", "0", "-Q", "-s", "F"}, 0, ""},
		{Mqstat, []string{"mqstat", "50-60"}, 1, "mqstat: jobs 50-60 do not exist\n"},
		{Mqstat, []string{"mqstat", "1", "4-5"}, 1, "mqstat: jobs 4-5 do not exist\n"},
		{Mqstat, []string{"mqstat", "-t", "nosuch"}, 0, "mqstat: no job matches -t nosuch\n"},
		// What the user typed is cut, as other messages cut values.
		{Mqstat, []string{"mqstat", "-t", strings.Repeat("q", 5000)}, 0, "mqstat: no job matches -t " + strings.Repeat("q", 297-len("-t ")) + "...\n"},
		{Mqstat, []string{"mqstat", "-a", "-s", "H"}, 0, "mqstat: no job matches -s H\n"},
		{Mqstat, []string{"mqstat", "1-3", "-s", "H"}, 0, "mqstat: no job matches 1-3 -s H\n"},
		{Mqstat, []string{"mqstat", "--acct", "-q", "nosuch"}, 0, "mqstat: no job matches -q nosuch\n"},
		{Mqstat, []string{"mqstat", "--json", "-t", "nosuch"}, 0, ""},
		{Mqstat, []string{"mqstat", "--cat", "50-60"}, 1, "mqstat: jobs 50-60 do not exist\n"},
		{Mqstat, []string{"mqstat", "--cat", "50-9223372036854775807"}, 1, "mqstat: jobs 50-9223372036854775807 do not exist\n"},
		{Mqstat, []string{"mqstat", "--cat", "all", "-t", "nosuch"}, 0, "mqstat: no job matches --cat all -t nosuch\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var o, e bytes.Buffer
			if code := Run(ctx, tc.app(tb.env(&o, &e)), tc.args); code != tc.code || e.String() != tc.stderr {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr %q", code, e.String(), tc.code, tc.stderr)
			}
		})
	}
	// A wait for a target whose jobs are all deleted ends at once, and
	// says so.
	o.Reset()
	e.Reset()
	if code := Run(ctx, Mqwait(tb.env(&o, &e)), []string{"mqwait", "-t", "b"}); code != 0 || e.String() != "mqwait: nothing to wait for: no job of -t b (deleted ones do not count)\n" {
		t.Errorf("mqwait -t b: exit %d, stderr %q", code, e.String())
	}
}
