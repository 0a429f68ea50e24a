package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestTargetListRefused: -t A,B, which mqdel reads as a list of targets,
// is a one-line usage error (exit 2, before dialling) in every command
// that selects one target: no target name has a comma, so mqstat listed
// nothing and exited 0, and the others said "target A,B does not exist".
// mqdel still takes it.
func TestTargetListRefused(t *testing.T) {
	t.Parallel()
	purge := func(env Env) *cli.App {
		return &cli.App{Name: "cls", Writer: env.Stdout, ErrWriter: env.Stderr, Commands: []*cli.Command{Purge(env)}}
	}
	for _, tc := range []struct {
		app  func(Env) *cli.App
		args []string
	}{
		{Mqstat, []string{"mqstat", "-t", "a,b"}},
		{Mqstat, []string{"mqstat", "--summary", "-t", "a,b"}},
		{Mqstat, []string{"mqstat", "--cat", "all", "-t", "a,b"}},
		{Mqwait, []string{"mqwait", "-t", "a,b"}},
		{Mqhold, []string{"mqhold", "-t", "a,b"}},
		{Mqrls, []string{"mqrls", "-t", "a,b"}},
		{Mqalter, []string{"mqalter", "--mem", "1G", "-t", "a,b"}},
		{Mqsub, []string{"mqsub", "--rerun", "-t", "a,b"}},
		{purge, []string{"cls", "purge", "--ended-before", "1d", "-t", "a,b"}},
	} {
		var out, errOut bytes.Buffer
		dialled := false
		env := Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd,
			Dial: func(context.Context) (io.ReadWriteCloser, error) {
				dialled = true
				return nil, errors.New("no CLS in this test")
			}}
		code := Run(context.Background(), tc.app(env), tc.args)
		if code != ExitUsage || dialled || !strings.Contains(errOut.String(), `-t "a,b": one target here`) || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, dialled %v, stderr %q; want exit %d and one line refusing the list", strings.Join(tc.args, " "), code, dialled, errOut.String(), ExitUsage)
		}
	}
	var errOut bytes.Buffer
	dialled := false
	env := Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &errOut, Getwd: os.Getwd,
		Dial: func(context.Context) (io.ReadWriteCloser, error) {
			dialled = true
			return nil, errors.New("no CLS in this test")
		}}
	if Run(context.Background(), Mqdel(env), []string{"mqdel", "-t", "a,b"}); !dialled {
		t.Errorf("mqdel -t a,b did not get to the CLS: %s", errOut.String())
	}
}
