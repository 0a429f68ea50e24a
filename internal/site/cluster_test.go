package site

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/protocol"
)

func sh(t *testing.T, home, cmd string) string {
	t.Helper()
	c := exec.Command("/bin/sh", "-c", cmd)
	c.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return string(out)
}

// The tunnel's authorized_keys line: installed once, replaced (not added
// to) when the port changes, other lines kept, and removed when the site is.
func TestTunnelAuthorizedKeys(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	ak := filepath.Join(home, ".ssh", "authorized_keys")
	os.WriteFile(ak, []byte("ssh-ed25519 AAAAuser user@laptop\nrestrict ssh-ed25519 AAAAother mq-tunnel:mq-other-abc\n"), 0o600)
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	pk, _ := ssh.NewPublicKey(pub)
	line := TunnelKeyLine(pk, 4711, "mq-s-abc")
	for _, want := range []string{`restrict,port-forwarding,permitopen="127.0.0.1:4711",permitlisten="127.0.0.1:1",command="/bin/false" ssh-ed25519 `, " mq-tunnel:mq-s-abc"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	sh(t, home, authorizeCommand(line, "mq-s-abc"))
	sh(t, home, authorizeCommand(line, "mq-s-abc")) // again: no second line
	line2 := TunnelKeyLine(pk, 4712, "mq-s-abc")
	sh(t, home, authorizeCommand(line2, "mq-s-abc"))
	b, _ := os.ReadFile(ak)
	got := string(b)
	if strings.Count(got, "mq-tunnel:mq-s-abc") != 1 || !strings.Contains(got, line2) || !strings.Contains(got, "user@laptop") || !strings.Contains(got, "mq-tunnel:mq-other-abc") {
		t.Errorf("authorized_keys after two ports:\n%s", got)
	}
	if fi, _ := os.Stat(ak); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	sh(t, home, unauthorizeCommand("mq-s-abc"))
	sh(t, home, unauthorizeCommand("mq-s-abc"))
	b, _ = os.ReadFile(ak)
	if got := string(b); strings.Contains(got, "mq-s-abc") || !strings.Contains(got, "user@laptop") || !strings.Contains(got, "mq-other-abc") {
		t.Errorf("authorized_keys after removal:\n%s", got)
	}
	// No file at all: made, mode 0600.
	home2 := t.TempDir()
	sh(t, home2, authorizeCommand(line, "mq-s-abc"))
	if b, err := os.ReadFile(filepath.Join(home2, ".ssh", "authorized_keys")); err != nil || string(b) != line+"\n" {
		t.Errorf("new authorized_keys %q %v", b, err)
	}
}

// A placeholder's batch log is found whatever the batch system named it,
// and the agent's last warning is what is shown.
func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	warn := `time=2026-01-01T00:00:00Z level=WARN msg="cannot reach the CLS; retrying" pid=7 err="cannot reach the CLS at 10.0.0.1:2222: dial tcp 10.0.0.1:2222: connect: connection refused" in=5s`
	os.WriteFile(filepath.Join(dir, "mq-s-a12b-4712.out"), []byte("other\n"), 0o600) // digits of the id inside a name
	os.WriteFile(filepath.Join(dir, "mq-s-a12b.o12"), []byte(warn+"\n"+warn+"\nsome noise\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "13.pbs.OU"), []byte("pbs\n"), 0o600)
	for _, tc := range []struct{ id, file, last string }{
		{"12", "mq-s-a12b.o12", warn},
		{"4712", "mq-s-a12b-4712.out", "other"},
		{"13", "13.pbs.OU", "pbs"},
		{"99", "", ""},
	} {
		file, last := parseLogTail([]byte(sh(t, dir, logTailCommand(dir, tc.id))))
		if filepath.Base(file) != tc.file && !(tc.file == "" && file == "") || last != tc.last {
			t.Errorf("id %s: file %q last %q, want %q %q", tc.id, file, last, tc.file, tc.last)
		}
	}
	if f, _ := parseLogTail([]byte(sh(t, dir, logTailCommand(filepath.Join(dir, "none"), "12")))); f != "" {
		t.Errorf("no log directory: %q", f)
	}
}

// shRunner runs a Remote's commands on this host with HOME set: a login
// host without SSH.
type shRunner struct{ home string }

func (r shRunner) Run(ctx context.Context, cmd string) ([]byte, error) {
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd)
	c.Env = []string{"HOME=" + r.home, "PATH=" + os.Getenv("PATH")}
	return c.Output()
}

func (r shRunner) Put(_ context.Context, p string, data []byte, mode os.FileMode) (bool, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return false, err
	}
	return true, os.WriteFile(p, data, mode)
}

func (shRunner) Close() error { return nil }

// The agent learns the site's data root, absolute (a relative one is under
// the login home), and the login host has it; a site that shares the CLS
// host's filesystem has none.
func TestPrepareDataRoot(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "mqagent")
	os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o755)
	for _, tc := range []struct {
		name string
		spec protocol.SiteSpec
		want string // relative to home when not absolute; "" = none
	}{
		{"default", protocol.SiteSpec{}, DefaultDataRoot},
		{"relative", protocol.SiteSpec{DataRoot: "data/mq/"}, "data/mq"},
		{"absolute", protocol.SiteSpec{DataRoot: "/ABS"}, "/ABS"},
		{"shared", protocol.SiteSpec{SharedFS: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			spec := tc.spec
			spec.Name, spec.Type, spec.SSH = "s", Slurm, "u@h"
			want := tc.want
			if want == "/ABS" {
				want = filepath.Join(t.TempDir(), "abs")
				spec.DataRoot = want
			} else if want != "" {
				want = filepath.Join(home, want)
			}
			if err := Validate(&spec); err != nil {
				t.Fatal(err)
			}
			r := &Remote{Spec: spec, Batch: ForType(spec.Type), CLSAddr: "127.0.0.1:1", JobName: "mq-s-x", Dir: ".mq-sites/x",
				Agent: func(string, string) (string, error) { return agent, nil },
				Dial:  func(context.Context) (login.Runner, error) { return shRunner{home}, nil },
			}
			if _, err := r.runner(context.Background()); err != nil {
				t.Fatal(err)
			}
			script, err := os.ReadFile(r.script)
			if err != nil {
				t.Fatal(err)
			}
			has := strings.Contains(string(script), "--data-root")
			if want == "" {
				if has {
					t.Errorf("a shared-fs site's agent got a data root:\n%s", script)
				}
				return
			}
			if !strings.Contains(string(script), "--data-root "+Quote(want)) && !strings.Contains(string(script), "--data-root "+want) {
				t.Errorf("script lacks --data-root %s:\n%s", want, script)
			}
			if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
				t.Errorf("data root %s not made: %v", want, err)
			}
			if _, root, err := r.Files(context.Background()); err == nil || root != "" {
				t.Errorf("Files over a runner without SFTP: %q, %v", root, err)
			}
		})
	}
}

// tunnelRunner is shRunner that can forward: it records the binds asked
// for and binds the port asked, but taken, or free for port 0.
type tunnelRunner struct {
	shRunner
	binds       *[]string
	taken, free int
}

func (r tunnelRunner) Forward(bind string, _ func() (net.Conn, error)) (int, error) {
	*r.binds = append(*r.binds, bind)
	_, p, _ := net.SplitHostPort(bind)
	port, _ := strconv.Atoi(p)
	if port == r.taken && port != 0 {
		return 0, errors.New("address in use")
	}
	if port == 0 {
		port = r.free
	}
	return port, nil
}

func (tunnelRunner) HostKey() ssh.PublicKey {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	pk, _ := ssh.NewPublicKey(pub)
	return pk
}

// tunnelSites gives a tunnel site's spec, and open, which makes a site of
// a spec over a tunnelRunner in home (the login host) that refuses port
// taken and binds free for port 0; the binds asked for are recorded.
func tunnelSites(t *testing.T) (protocol.SiteSpec, func(spec protocol.SiteSpec, home string, taken, free int) (*Remote, *[]string)) {
	agent := filepath.Join(t.TempDir(), "mqagent")
	os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o755)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key := pem.EncodeToMemory(block)
	spec := protocol.SiteSpec{Name: "s", Type: Slurm, SSH: "u@h", Connect: Tunnel, Walltime: 3600, Slots: 1}
	if err := Validate(&spec); err != nil {
		t.Fatal(err)
	}
	return spec, func(spec protocol.SiteSpec, home string, taken, free int) (*Remote, *[]string) {
		binds := &[]string{}
		return &Remote{Spec: spec, Batch: ForType(spec.Type), JobName: "mq-s-x", Dir: ".mq-sites/x", Key: key,
			Agent:   func(string, string) (string, error) { return agent, nil },
			DialCLS: func() (net.Conn, error) { return nil, errors.New("unused") },
			Dial: func(context.Context) (login.Runner, error) {
				return tunnelRunner{shRunner{home}, binds, taken, free}, nil
			},
		}, binds
	}
}

// A tunnel site keeps the port its running placeholders dial: a CLS
// restarted asks the login host for the port its line there permits, and
// cls site set rewrites the batch script on the open connection, its
// forward untouched.
func TestTunnelKeepsPort(t *testing.T) {
	spec, open := tunnelSites(t)
	home := t.TempDir()
	script := func(r *Remote) string {
		b, err := os.ReadFile(r.script)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// The first CLS: a port of the login host's choosing.
	first, binds := open(spec, home, 0, 5000)
	if _, err := first.runner(context.Background()); err != nil {
		t.Fatal(err)
	}
	if first.tunnel != 5000 || !strings.Contains(script(first), "127.0.0.1:5000") {
		t.Fatalf("first tunnel: port %d, binds %v", first.tunnel, *binds)
	}
	// Restarted: the port its line permits.
	again, binds := open(spec, home, 0, 5001)
	if _, err := again.runner(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(*binds) != 1 || (*binds)[0] != "127.0.0.1:5000" || again.tunnel != 5000 {
		t.Errorf("after a restart: binds %v, port %d; want 127.0.0.1:5000 asked and kept", *binds, again.tunnel)
	}
	// That port taken meanwhile: another, and the line follows it.
	taken, tbinds := open(spec, home, 5000, 6000)
	if _, err := taken.runner(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*tbinds, " "); got != "127.0.0.1:5000 127.0.0.1:0" || taken.tunnel != 6000 {
		t.Errorf("port taken: binds %s, port %d; want the old port asked, then any (6000)", got, taken.tunnel)
	}
	if ak, _ := os.ReadFile(filepath.Join(home, ".ssh", "authorized_keys")); permittedPort(ak) != 6000 {
		t.Errorf("the line permits %d, want 6000:\n%s", permittedPort(ak), ak)
	}
	// cls site set: the script anew with the new walltime, no new forward.
	spec2 := spec
	spec2.Walltime = 7200
	next, _ := open(spec2, home, 0, 5002)
	if !again.Retarget(next) {
		t.Fatal("a cluster site does not retarget to a cluster site")
	}
	before := len(*binds)
	if _, err := again.runner(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := script(again); !strings.Contains(s, "127.0.0.1:5000") || !strings.Contains(s, "--walltime 1h55m") {
		t.Errorf("after set: script\n%s\nwant the same port and the new walltime", s)
	}
	if len(*binds) != before {
		t.Errorf("set forwarded again: %v", *binds)
	}
	if again.Retarget(&Processes{}) {
		t.Error("a cluster site retargets to a local one")
	}
}

// permittedPort reads the port of a tunnel line, and nothing else.
func TestPermittedPort(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	pk, _ := ssh.NewPublicKey(pub)
	for _, tc := range []struct {
		line string
		want int
	}{
		{TunnelKeyLine(pk, 4711, "mq-s-x"), 4711},
		{"", 0},
		{`permitopen="127.0.0.1:99999"`, 0},
		{`permitopen="10.0.0.1:22"`, 0},
	} {
		if got := permittedPort([]byte(tc.line)); got != tc.want {
			t.Errorf("permittedPort(%q) = %d, want %d", tc.line, got, tc.want)
		}
	}
}

// A refused submission or cancel is named by the batch command that
// refused it, and the submission loop still submits n times, stopping at
// the first failure.
func TestBatchCommandNames(t *testing.T) {
	for _, typ := range []string{SGE, Slurm, PBS} {
		b := ForType(typ)
		want := map[string]string{SGE: "qsub", Slurm: "sbatch", PBS: "qsub"}[typ]
		if got := login.CommandName(submitLoop(b.SubmitCommand("/s.sh", []string{"-A", "p"}), 3)); got != want {
			t.Errorf("%s: a failed submission is named %q, want %q", typ, got, want)
		}
		list := map[string]string{SGE: "qstat", Slurm: "squeue", PBS: "qselect"}[typ]
		if got := login.CommandName(b.ListCommand("mq-x")); got != list {
			t.Errorf("%s: a failed listing is named %q, want %q", typ, got, list)
		}
		cancel := map[string]string{SGE: "qdel", Slurm: "scancel", PBS: "qdel"}[typ]
		if got := login.CommandName(b.CancelCommand([]string{"1", "2"})); got != cancel {
			t.Errorf("%s: a failed cancel is named %q, want %q", typ, got, cancel)
		}
	}
	dir := t.TempDir()
	// A qsub that accepts two submissions and refuses the third.
	os.WriteFile(filepath.Join(dir, "qsub"), []byte("#!/bin/sh\nn=$(cat "+dir+"/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > "+dir+"/n\n[ $n -le 2 ] || { echo refused >&2; exit 3; }\necho $((4710+n))\n"), 0o755)
	submit := func(n int) (string, error) {
		c := exec.Command("/bin/sh", "-c", submitLoop("qsub -terse x", n))
		c.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
		out, err := c.Output()
		return string(out), err
	}
	if out, err := submit(1); out != "4711\n\n" || err != nil {
		t.Errorf("one submission: %q, %v", out, err)
	}
	os.Remove(filepath.Join(dir, "n"))
	out, err := submit(3)
	var ee *exec.ExitError
	if out != "4711\n\n4712\n\n" || !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("three submissions, the third refused: %q, %v", out, err)
	}
}
