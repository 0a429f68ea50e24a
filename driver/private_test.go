package driver

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// A job's command line runs as /bin/sh -c LINE, which every user of the
// host the job runs on can read (ps, /proc/PID/cmdline) while it runs:
// Env's values and Stdin's bytes travel in the job's environment instead,
// which only its owner can read, and still reach the job exactly. The job
// prints the command line of the shell that runs it (/proc/$$/cmdline for
// Exec's command; for a Cmd's program, here sh, its parent's), then what
// it got; in both modes, through Exec's options and a Cmd.
func TestEnvAndStdinNotInCommandLine(t *testing.T) {
	t.Parallel()
	const token, password = "s3cr3t-token-value", "password-4711"
	stdin := append([]byte(password+"\n"), allBytes()...)
	show := func(pid string) string {
		return `tr '\0\n' '  ' </proc/` + pid + `/cmdline; echo; printf '[%s|%s]' "$API_TOKEN" "${MQ_DRIVER_STDIN-unset}"; cat`
	}
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			d := m.start(t, Config{Dir: t.TempDir()})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			check := func(how string, out []byte) {
				t.Helper()
				line, got, _ := bytes.Cut(out, []byte("\n"))
				if !bytes.Contains(line, []byte("-c")) {
					t.Fatalf("%s: %q is not the command line of the job's shell", how, line)
				}
				if bytes.Contains(line, []byte(token)) || bytes.Contains(line, []byte(password)) {
					t.Errorf("%s: the job's command line holds its secrets: %q", how, line)
				}
				if want := "[" + token + "|unset]" + string(stdin); string(got) != want {
					t.Errorf("%s: the job got %q\nwant %q", how, got, want)
				}
			}

			c := d.CommandContext(ctx, "sh", "-c", show("$PPID"))
			c.Env = []string{"API_TOKEN=" + token}
			c.Stdin = bytes.NewReader(stdin)
			out, err := c.Output()
			if err != nil {
				t.Fatal(err)
			}
			check("Cmd", out)
			if s := c.String(); strings.Contains(s, token) || strings.Contains(s, password) {
				t.Errorf("Cmd.String() shows the secrets: %q", s)
			}

			k, err := d.Exec(ctx, show("$$"), Env("API_TOKEN="+token), Stdin(stdin))
			if err != nil {
				t.Fatal(err)
			}
			res, err := d.WaitForOne(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			out, err = res.Stdout(ctx)
			if err != nil {
				t.Fatal(err)
			}
			check("Exec", out)
		})
	}
}

// What the environment cannot carry stays in the command line, and
// reaches the job all the same: a value that is not UTF-8, a name of
// mq's own, and what would pass protocol.MaxEnvBytes.
func TestPrivateKeepsWhatEnvCannotCarry(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("b", 40<<10)
	for _, tc := range []struct {
		name    string
		w       wrap
		private []string // variables taken into the environment
		line    []string // variables left in the line
	}{
		{"utf-8", wrap{env: []string{"A=1", "B=é", "A=2"}}, []string{"A", "B"}, nil},
		{"not utf-8", wrap{env: []string{"A=\xff", "B=ok"}}, []string{"B"}, []string{"A"}},
		{"mq's own", wrap{env: []string{"MQ_X=1", "Y=2"}}, []string{"Y"}, []string{"MQ_X"}},
		{"past MaxEnvBytes", wrap{env: []string{"A=" + big, "B=" + big, "C=c"}}, []string{"A", "C"}, []string{"B"}},
		{"stdin past the room left", wrap{env: []string{"A=" + big}, stdin: bytes.Repeat([]byte{0xff}, 8<<10), hasStdin: true}, []string{"A"}, nil},
	} {
		w := tc.w
		env, err := w.private()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got, left []string
		for _, name := range []string{"A", "B", "C", "MQ_X", "Y"} {
			if _, ok := env[name]; ok {
				got = append(got, name)
			}
		}
		for _, kv := range w.env {
			name, _, _ := strings.Cut(kv, "=")
			left = append(left, name)
		}
		if strings.Join(got, ",") != strings.Join(tc.private, ",") || strings.Join(left, ",") != strings.Join(tc.line, ",") {
			t.Errorf("%s: environment %v, line %v; want %v, %v", tc.name, got, left, tc.private, tc.line)
		}
		if _, ok := env[stdinVar]; ok != (tc.w.hasStdin && tc.name != "stdin past the room left") {
			t.Errorf("%s: stdin in the environment %v", tc.name, ok)
		}
		line, err := w.script(`printf '%s|' "$A" "${B-}" "${C-}" "${MQ_X-}" "${Y-}"; cat`)
		if err != nil {
			t.Fatal(err)
		}
		var vars []string
		for k, v := range env {
			vars = append(vars, k+"="+v)
		}
		out := runShell(t, "/bin/sh", line, vars...)
		want := map[string]string{}
		for _, kv := range tc.w.env {
			k, v, _ := strings.Cut(kv, "=")
			want[k] = v
		}
		if w := want["A"] + "|" + want["B"] + "|" + want["C"] + "|" + want["MQ_X"] + "|" + want["Y"] + "|" + string(tc.w.stdin); string(out) != w {
			t.Errorf("%s: the job got %.80q..., want %.80q...", tc.name, out, w)
		}
	}
	w := wrap{env: []string{stdinVar + "=x"}, hasStdin: true}
	if _, err := w.private(); err == nil {
		t.Errorf("%s set by the caller: no error", stdinVar)
	}
}
