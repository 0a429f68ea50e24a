//go:build e2e

package sites

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The login host's key changes while the site runs (sshd restarted with
// a new key: a reinstalled login node, or someone in the middle): the
// reconnection is refused naming both keys, nothing is submitted with
// it, and the CLS keeps answering.
func TestHostKeyChangedWhileRunning(t *testing.T) {
	need(t, "slurm")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	c.addSite("rekeyed", "slurm", l, "--max", "1", "--walltime", "10m", "--idle", "3s")
	c.must("mqsub", "-q", "q", "first", "true")
	eventually(t, 2*time.Minute, "the first job done", func() bool { return len(c.jobs("D")) == 1 })
	// Its placeholder gone (idle), so the next job needs a new one.
	eventually(t, time.Minute, "the first placeholder gone", func() bool {
		s := c.sites()["rekeyed"]
		return s.Queued+s.Running+s.Connected == 0
	})
	before := len(batchIDs(t, "slurm", "mq-rekeyed-")) // another run's, if any
	l.stop()
	key := filepath.Join(l.dir, "host_key")
	os.Remove(key)
	os.Remove(key + ".pub")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	l.start() // known_hosts still has the old key
	logBefore := len(readFile(filepath.Join(l.dir, "sshd.log")))
	c.must("mqsub", "-q", "q", "second", "true")
	eventually(t, time.Minute, "refused", func() bool {
		s := c.sites()["rekeyed"]
		return s.State == "degraded" && strings.Contains(s.Error, "the login host's key has changed")
	})
	msg := c.sites()["rekeyed"].Error
	if !strings.Contains(msg, "SHA256:") || !strings.Contains(msg, "ssh-keygen -R") {
		t.Errorf("message does not name the keys and the fix: %s", msg)
	}
	if log := readFile(filepath.Join(l.dir, "sshd.log"))[logBefore:]; strings.Contains(log, "Accepted publickey") {
		t.Errorf("the CLS authenticated to the login host after its key changed:\n%s", log)
	}
	if js := c.jobs("Q"); len(js) != 1 {
		t.Errorf("mqstat: %d queued jobs, want the second one", len(js))
	}
	if ids := batchIDs(t, "slurm", "mq-rekeyed-"); len(ids) != before {
		t.Errorf("placeholders submitted through a login host whose key changed: %q", ids)
	}
}

// A login host that accepts the connection and then says nothing (a
// hung sshd, a firewall that drops the rest): the site is degraded when
// its connect times out, and all the while cls site list, mqstat and mqsub
// answer at once.
func TestLoginHostSilent(t *testing.T) {
	need(t, "slurm")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	l := &login{t: t, dir: t.TempDir(), addr: ln.Addr().String(), user: "mquser"}
	l.knownHosts = filepath.Join(l.dir, "known_hosts")
	os.WriteFile(l.knownHosts, nil, 0o644) // never reached
	c := startCLS(t)
	c.addSite("silent", "slurm", l, "--max", "1")
	c.must("mqsub", "-q", "q", "j", "true")
	// The dial takes up to its 20 s timeout; each answer must not wait
	// for it (10 s: a busy machine, well below the dial's timeout).
	for deadline := time.Now().Add(25 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		for _, cmd := range [][]string{{"cls", "site", "list"}, {"mqstat"}, {"mqsub", "-q", "q", "more", "true"}} {
			start := time.Now()
			c.must(cmd[0], cmd[1:]...)
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("%s took %s while the login host was silent", strings.Join(cmd, " "), d)
			}
		}
	}
	eventually(t, time.Minute, "degraded by the timeout", func() bool {
		s := c.sites()["silent"]
		return s.State == "degraded" && strings.Contains(s.Error, "no SSH handshake within")
	})
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
