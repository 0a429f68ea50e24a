//go:build e2e

package sites

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A login host reached through a jump host (cls site add --jump, as
// ssh -J): the site works through the jump host's sshd, both hosts' keys
// are checked in one known_hosts, and when the jump host goes down the
// site says so (not the login host, which is up) and comes back with it.
// (Running placeholders dial the CLS themselves: the jump host carries
// only the CLS's connection to the login host.)
func TestJumpHost(t *testing.T) {
	need(t, "slurm")
	for _, connect := range []string{"direct", "tunnel"} {
		t.Run(connect, func(t *testing.T) { jumpHost(t, connect) })
	}
}

func jumpHost(t *testing.T, connect string) {
	l := newLogin(t, "127.0.0.1")
	jump := newLogin(t, "127.0.0.1")
	kh := filepath.Join(t.TempDir(), "known_hosts")
	var both []byte
	for _, f := range []string{l.knownHosts, jump.knownHosts} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		both = append(both, b...)
	}
	if err := os.WriteFile(kh, both, 0o600); err != nil {
		t.Fatal(err)
	}
	c := startCLS(t)
	c.must("cls", "site", "add", "behind", "--type", "slurm", "--ssh", l.user+"@"+l.addr, "--jump", jump.user+"@"+jump.addr,
		"--key", clientKey, "--known-hosts", kh, "--connect", connect, "--max", "1", "--walltime", "10m", "--idle", "3s")
	if out := c.must("cls", "site", "list"); !strings.Contains(out, "via "+jump.user+"@"+jump.addr) {
		t.Errorf("cls site list does not say the jump host:\n%s", out)
	}
	c.must("mqsub", "-q", "q", "j1", "echo one")
	eventually(t, 2*time.Minute, "the first job done through the jump host", func() bool { return len(c.jobs("D")) == 1 })

	jump.stop()
	eventually(t, time.Minute, "degraded for its jump host", func() bool {
		s := c.sites()["behind"]
		return s.State == "degraded" && strings.Contains(s.Error, "cannot reach the jump host")
	})
	t.Logf("degraded: %s", c.sites()["behind"].Error)
	jump.start()
	eventually(t, time.Minute, "recovered", func() bool { return c.sites()["behind"].State == "ok" })
	c.must("mqsub", "-q", "q", "j2", "echo two")
	eventually(t, 2*time.Minute, "the second job done", func() bool { return len(c.jobs("D")) == 2 })
}
