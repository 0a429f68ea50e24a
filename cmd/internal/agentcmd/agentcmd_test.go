package agentcmd

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder"
	"github.com/mq-hpc/mq/internal/sshkey"
	"github.com/mq-hpc/mq/protocol"
	"golang.org/x/crypto/ssh"
)

// TestUsage: both commands check their command line the same way, before
// anything is dialled; each refusal is a UsageError naming the flag.
func TestUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode Mode
		args string
		want string
	}{
		{Remote, "--site s --out /tmp", "--cls, --host-key, --key, --site and --out are required"},
		{Remote, "--cls h:1 --site s", "required"},
		{Remote, "--cls h:1 --site s --out /tmp", "--cls needs --key"},
		{Remote, "--noop", "unknown flag --noop"},
		{Local, "--slots 0", "--slots must be 1..4096, not 0"},
		{Local, "--slots 5000", "--slots must be 1..4096"},
		{Local, "--walltime -1s", "walltime"},
		{Local, "--log-level loud", "--log-level"},
		{Local, "--log-format xml", "--log-format must be text or json"},
		{Local, "--umask 999", "--umask must be octal"},
		{Local, "--key k", "--key is only for --cls"},
		{Local, "--via u@h:22", "--via is only for --cls"},
		{Local, "extra", `unexpected argument "extra"`},
		{Local, "--cpus 0", "--cpus must be 1..4096, not 0"},
		{Local, "--cpus -2", "--cpus must be 1..4096"},
		{Local, "--cpus 1.5", `"1.5"`}, // worded by the flag package (or by flagmsg)
		{Local, "--cpus 4 --slots 2", "--cpus 4 and --slots 2 say the same thing"},
		{Local, "--mem 8X", `--mem: memory "8X": unknown unit`},
		{Local, "--mem 1e30", `--mem: memory "1e30"`},
		{Local, "--mem=", "--mem: empty"},
		{Local, "--gpus -1", "--gpus must be 0..64"},
		{Local, "--resource 9lives=1", `"9lives" is not a name`},
		{Local, "--resource lic=0", "--resource"},
		{Local, "--resource lic=1 --resource lic=2", "--resource lic given twice"},
		{Remote, "--mem 8X", "required"}, // the required flags first, as before
		// A value flag without its value, before the flag package takes
		// the next flag as it: both named, not what follows an '='.
		{Remote, "--key --cls h:1 --site s --out /tmp", "--key has no value: the word after it, --cls, is a flag (a value that begins with '-' is written --key=VALUE)"},
		{Local, "-site --out=/secret/x", "-site has no value: the word after it, --out, is a flag"},
		{Local, "--slots -h", "--slots has no value: the word after it, -h, is a flag"},
		{Local, "--noop --slots 0", "--slots must be 1..4096, not 0"}, // a bool flag takes no value
		{Local, "extra --site --out", `unexpected argument "extra"`},  // flags end at the first argument
	} {
		err := Run(context.Background(), "test", tc.mode, strings.Fields(tc.args), io.Discard)
		var ue UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mode %d %q: %v, want a usage error with %q", tc.mode, tc.args, err, tc.want)
		}
	}
	if err := Run(context.Background(), "test", Local, []string{"--help"}, io.Discard); err != nil {
		t.Errorf("--help: %v", err)
	}
}

func TestResolveDataRoot(t *testing.T) {
	t.Parallel()
	home := func() (string, error) { return "/home/u", nil }
	noHome := func() (string, error) { return "", errors.New("no home") }
	for _, tc := range []struct {
		in, want string
		home     func() (string, error)
		err      bool
	}{
		{"", "", noHome, false},
		{"/scratch/mq/", "/scratch/mq", noHome, false},
		{".mq-data/cls1", "/home/u/.mq-data/cls1", home, false},
		{"data", "", noHome, true},
	} {
		got, err := resolveDataRoot(tc.in, tc.home)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("resolveDataRoot(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestRefusesSharedDirs: a --data-root or --out others can write is
// refused before the agent connects, with one line naming the fix; a
// missing one is made private.
func TestRefusesSharedDirs(t *testing.T) {
	t.Setenv("MQ_HOME", t.TempDir())
	base := t.TempDir()
	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ args, want string }{
		{"--data-root " + shared, "--data-root " + shared + " is writable by others (mode 0777): they could replace its files; chmod 700 " + shared},
		{"--out " + shared, "--out " + shared + " is writable by others"},
	} {
		// Bounded: an agent that took the directory would go on to connect.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := Run(ctx, "test", Local, strings.Fields(tc.args), io.Discard)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", tc.args, err, tc.want)
		}
	}
	made := filepath.Join(base, "new", "root")
	if _, err := privateDir("--data-root", made); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{made, filepath.Dir(made)} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v, %v; want a private directory", d, fi.Mode(), err)
		}
	}
}

// TestCheckOptions: the flags' values the agent takes in another form
// (sizes in bytes, no cap as negative, the log level) come out of check.
func TestCheckOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args               string
		maxOutput, reserve int64
		level              string
	}{
		{"", 1 << 30, 0, "WARN"},
		{"--max-output 0 --output-reserve 64M --log-level debug", -1, 64 << 20, "DEBUG"},
		{"--max-output 512K", 512 << 10, 0, "WARN"},
	} {
		f, _, err := parse("test", Local, strings.Fields(tc.args), io.Discard)
		if err != nil {
			t.Fatalf("%q: parse: %v", tc.args, err)
		}
		o, err := f.check(Local)
		if err != nil {
			t.Fatalf("%q: check: %v", tc.args, err)
		}
		if o.maxOutput != tc.maxOutput || o.reserve != tc.reserve || o.level.String() != tc.level || o.dataRoot != "" {
			t.Errorf("%q: %+v, want max output %d, reserve %d, level %s, no data root", tc.args, o, tc.maxOutput, tc.reserve, tc.level)
		}
		if f.host == "" {
			t.Errorf("%q: no host name filled in", tc.args)
		}
	}
	if f, _, err := parse("test", Local, []string{"-help"}, io.Discard); f != nil || err != nil {
		t.Errorf("-help: %v, %v; want nothing to run and no error", f, err)
	}
}

// TestAskedCapacity: what the flags ask for, as the agent compares it
// with what it detects.
func TestAskedCapacity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args string
		want string
	}{
		{"", "cpus=1"},
		{"--slots 4", "cpus=4"},
		{"--cpus 4", "cpus=4"},
		{"--cpus 4 --slots 4", "cpus=4"},
		{"--cpus 16 --mem 64G --gpus 2 --resource lic=3 --resource scratch=100", "cpus=16 mem=64 GiB gpus=0,1 lic=3 scratch=100"},
		{"--mem 1.5G", "cpus=1 mem=1.5 GiB"},
	} {
		f, _, err := parse("test", Local, strings.Fields(tc.args), io.Discard)
		if err != nil {
			t.Fatalf("%q: parse: %v", tc.args, err)
		}
		o, err := f.check(Local)
		if err != nil {
			t.Fatalf("%q: check: %v", tc.args, err)
		}
		if got := o.asked.String(); got != tc.want {
			t.Errorf("%q asks %q; want %q", tc.args, got, tc.want)
		}
		if f.slots != o.asked.CPUs {
			t.Errorf("%q: %d slots for %d cpus", tc.args, f.slots, o.asked.CPUs)
		}
	}
}

// cls agent's --out defaults to $MQ_HOME/output with --cls too, as its
// help says: the directory is checked (here refused, others can write
// it) rather than an empty path failing to be made.
func TestClsAgentOutDefault(t *testing.T) {
	home := t.TempDir()
	t.Setenv("MQ_HOME", home)
	key := filepath.Join(t.TempDir(), "ph")
	pub, err := sshkey.NewKeyPair(key, "test")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(home, "output")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	args := []string{"--cls", "127.0.0.1:1", "--key", key, "--host-key", ssh.FingerprintSHA256(pub)}
	err = Run(ctx, "test", Local, args, io.Discard)
	if want := "--out " + out + " is writable by others"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("cls agent %v: %v, want %q", args, err, want)
	}
}

// TestStopWithCLS: protocol.CLSStopSignal ends a local agent's context
// with the cause placeholder.ErrCLSStopped, so the jobs it stops are not
// counted against their attempts.
func TestStopWithCLS(t *testing.T) {
	ctx, stop := stopWithCLS(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), protocol.CLSStopSignal); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the signal did not end the context in a minute")
	}
	if err := context.Cause(ctx); !errors.Is(err, placeholder.ErrCLSStopped) {
		t.Errorf("cause %v, want placeholder.ErrCLSStopped", err)
	}
}
