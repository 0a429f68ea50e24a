//go:build e2e

package sites

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sitelogin "github.com/mq-hpc/mq/internal/site/login"
)

// A login host that asks, after the key, for a one-time code at each
// login from outside (keyboard-interactive through PAM, as centres with
// MFA ask for a token's code; compute nodes' logins, from inside, need
// only a key) can be a site: added with --openssh and a Host of the
// user's ssh config, it is degraded, saying to log in, until cls site
// login answers once (through SSH_ASKPASS, as a terminal would); the
// CLS's connections then ride on that login, a job runs (directly, and
// through a tunnel, where it does again after the CLS is killed and
// started), and a job's input and output are staged over ssh's SFTP
// session. When the login ends (cls site logout) the site says to log
// in again, and a second login brings it back. The login host is asked
// for a code only at those two logins, and never by the CLS on its own:
// at a real centre, wrong answers lock the account.
func TestOpenSSHSite(t *testing.T) {
	need(t, "slurm")
	for _, connect := range []string{"direct", "tunnel"} {
		t.Run(connect, func(t *testing.T) { openSSHSite(t, connect) })
	}
}

func openSSHSite(t *testing.T, connect string) {
	o := newOTPLogin(t, "127.0.0.1")
	l := o.login
	dir := t.TempDir()
	host, port, _ := net.SplitHostPort(l.addr)
	conf := filepath.Join(dir, "config")
	os.WriteFile(conf, []byte("Host hpc\n  HostName "+host+"\n  Port "+port+"\n  User "+l.user+"\n  IdentityFile "+clientKey+
		"\n  IdentitiesOnly yes\n  UserKnownHostsFile "+l.knownHosts+"\n  BindAddress 127.0.0.2\n"), 0o600) // from outside
	wrapper := filepath.Join(dir, "sshwrap") // ssh reads no config of this machine's user
	os.WriteFile(wrapper, []byte("#!/bin/sh\nexec ssh -F "+conf+" \"$@\"\n"), 0o700)
	askpass := o.askpass
	t.Setenv("MQ_SSH", wrapper)
	t.Setenv("SSH_AUTH_SOCK", "")

	// Registered before the CLS's cleanup, so it runs after it: the
	// site's removal cancels its placeholders through the login.
	var controlPath string
	t.Cleanup(func() {
		if controlPath != "" {
			exec.Command(wrapper, "-o", "ControlPath="+controlPath, "-O", "exit", "hpc").Run()
		}
	})
	c := startCLS(t)
	controlPath = filepath.Join(sitelogin.ControlDir(c.home), "%C")
	tryLogin := func() (string, error) {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "cls"), "site", "login", "hpc")
		cmd.Env = append(os.Environ(), "MQ_HOME="+c.home, "SSH_ASKPASS="+askpass, "SSH_ASKPASS_REQUIRE=force")
		// Files, not pipes: the master ssh leaves in the background.
		out, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd.Stdout, cmd.Stderr = out, out
		err = cmd.Run()
		said, _ := os.ReadFile(out.Name())
		return string(said), err
	}
	login := func() {
		t.Helper()
		if said, err := tryLogin(); err != nil || !strings.Contains(said, "logged in to site hpc") {
			t.Fatalf("cls site login hpc: %v: %s", err, said)
		}
	}
	degraded := func(what string) {
		t.Helper()
		eventually(t, time.Minute, what, func() bool {
			s := c.sites()["hpc"]
			return s.State == "degraded" && s.NeedsLogin && strings.Contains(s.Error, "cls site login hpc")
		})
		t.Logf("degraded: %s", c.sites()["hpc"].Error)
		// mqstat, where users look, says it too.
		cmd := exec.Command(filepath.Join(binDir, "mqstat"))
		cmd.Env = append(os.Environ(), "MQ_HOME="+c.home)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "mqstat: warning: site hpc waits for you to log in: cls site login hpc\n") {
			t.Errorf("mqstat with the site waiting for a login: %v: %s", err, out)
		}
	}

	if out := c.must("cls", "site", "add", "hpc", "--type", "slurm", "--ssh", "hpc", "--openssh", "--connect", connect,
		"--max", "1", "--walltime", "10m", "--idle", "3s"); !strings.HasSuffix(out, "log in once with: cls site login hpc\n") {
		t.Errorf("cls site add --openssh does not say how to log in:\n%s", out)
	}
	if out := c.must("cls", "site", "list"); !strings.Contains(out, "hpc (openssh)") {
		t.Errorf("cls site list does not say the site is reached with ssh:\n%s", out)
	}
	c.must("mqsub", "-q", "q", "j1", "echo one")
	degraded("degraded until the user logs in")
	// A login host that takes the code and then closes the connection
	// (here its PAM refuses the credentials): the login fails, saying so.
	o.closeAfterCode(true)
	if said, err := tryLogin(); err == nil || strings.Contains(said, "logged in") {
		t.Fatalf("cls site login hpc, the connection closed after the code: %v: %s", err, said)
	} else {
		t.Logf("cls site login hpc, the connection closed after the code: %v: %s", err, said)
	}
	o.closeAfterCode(false)
	login()
	eventually(t, 2*time.Minute, "the first job done through the login", func() bool { return len(c.jobs("D")) == 1 })

	// Files staged there and back go over ssh's SFTP session.
	if err := os.WriteFile(filepath.Join(c.work, "params.txt"), []byte("alpha=0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.must("mqsub", "-q", "q", "--in", "params.txt", "--out", "staged.out", "staged", "cat params.txt > staged.out")
	eventually(t, 2*time.Minute, "the job with a staged input done", func() bool { return len(c.jobs("D")) == 2 })
	dest := filepath.Join(t.TempDir(), "staged.out")
	c.must("cls", "files", "get", "staged.out", dest)
	if got, err := os.ReadFile(dest); err != nil || string(got) != "alpha=0.5\n" {
		t.Fatalf("the staged job's output came back as %q, %v", got, err)
	}
	done := 2
	// A CLS killed and started again rides on the same login: the
	// tunnel's forward, which the master kept, is taken up again, and
	// the login (the master's session on the login host) is not ended
	// as a stale one. (In direct mode the CLS's endpoint, on a port of
	// its own choosing here, moves with the restart.)
	if connect == "tunnel" {
		restartKeepsLogin(t, c, wrapper, controlPath)
		done++
	}

	if out := c.must("cls", "site", "login", "hpc"); !strings.Contains(out, "already logged in to site hpc") {
		t.Errorf("cls site login while logged in said %q", out)
	}
	if out := c.must("cls", "site", "logout", "hpc"); out != "logged out of site hpc\n" {
		t.Errorf("cls site logout said %q", out)
	}
	if _, err := c.run("cls", "site", "logout", "hpc"); err == nil || !strings.Contains(err.Error(), "not logged in to site hpc") {
		t.Errorf("cls site logout when logged out: %v", err)
	}
	c.must("mqsub", "-q", "q", "j2", "echo two")
	degraded("degraded once the login ended")
	login()
	eventually(t, 2*time.Minute, "the next job done after logging in again", func() bool { return len(c.jobs("D")) == done+1 })
	if tries, logins := o.tries(), o.logins(); tries != 3 || logins != 3 {
		t.Errorf("the login host was asked for a code %d times, %d of them right; want the three logins only", tries, logins)
	}
}

// otpLogin is a login host that asks, after the key, for a one-time code
// through PAM: pam_exec runs a check that takes each code once, then
// moves to the next, and notes every answer it is given.
type otpLogin struct {
	*login
	t       *testing.T
	service string // the PAM service's file
	check   string // the program that checks a code
	dir     string
	askpass string // prints the code the check takes now, as a token would
}

func newOTPLogin(t *testing.T, host string) *otpLogin {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a PAM service of the test's own needs root")
	}
	o := &otpLogin{t: t, dir: t.TempDir()}
	o.askpass = filepath.Join(o.dir, "askpass")
	check := filepath.Join(o.dir, "check")
	os.WriteFile(filepath.Join(o.dir, "code"), []byte("100003\n"), 0o600)
	os.WriteFile(o.askpass, []byte("#!/bin/sh\nexec cat "+filepath.Join(o.dir, "code")+"\n"), 0o700)
	// expose_authtok: the answer, then a NUL, on standard input.
	os.WriteFile(check, []byte(`#!/bin/sh
PATH=/usr/bin:/bin
cd `+o.dir+` || exit 1
answer=$(tr -d '\000')
echo "$answer" >> tries
[ "$answer" = "$(cat code)" ] || exit 1
echo $(($(cat code) + 7)) > code
echo "$PAM_USER" >> logins
`), 0o700)
	// sshd, run under the service's name, asks it (and no other
	// service: the machine's logins are untouched).
	pam := fmt.Sprintf("mq-otp-%d", time.Now().UnixNano())
	o.service = filepath.Join("/etc/pam.d", pam)
	o.check = check
	o.closeAfterCode(false)
	t.Cleanup(func() { os.Remove(o.service) })
	o.login = startLogin(&login{t: t, dir: t.TempDir(), addr: freePort(t, host), user: "mquser", pam: pam})
	return o
}

// closeAfterCode writes the PAM service: with close, the code is taken
// but the credentials are refused (pam_exec alone sets none), and sshd
// closes the connection it had just accepted. PAM reads the file at
// each login.
func (o *otpLogin) closeAfterCode(close bool) {
	o.t.Helper()
	conf := "auth required pam_exec.so expose_authtok quiet " + o.check + "\n"
	if !close {
		conf += "auth required pam_permit.so\n"
	}
	conf += "account required pam_permit.so\nsession required pam_permit.so\npassword required pam_deny.so\n"
	if err := os.WriteFile(o.service, []byte(conf), 0o644); err != nil {
		o.t.Fatal(err)
	}
}

// tries is how many answers the login host was given; logins, how many
// were right.
func (o *otpLogin) tries() int  { return o.lines("tries") }
func (o *otpLogin) logins() int { return o.lines("logins") }

func (o *otpLogin) lines(name string) int {
	b, _ := os.ReadFile(filepath.Join(o.dir, name))
	return strings.Count(string(b), "\n")
}

func restartKeepsLogin(t *testing.T, c *cls, wrapper, controlPath string) {
	t.Helper()
	master := func() string {
		out, err := exec.Command(wrapper, "-o", "ControlPath="+controlPath, "-O", "check", "hpc").CombinedOutput()
		if err != nil {
			t.Fatalf("ssh -O check: %v %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	before := master()
	c.kill()
	c.restart()
	c.must("mqsub", "-q", "q", "j1b", "echo again")
	eventually(t, 2*time.Minute, "a job done after the CLS's restart", func() bool { return len(c.jobs("D")) == 3 })
	if after := master(); after != before {
		t.Fatalf("the login changed across the CLS's restart: %s, then %s", before, after)
	}
}
