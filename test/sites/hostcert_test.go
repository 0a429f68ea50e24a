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

// A login host whose key is signed by a host certificate authority
// (OpenSSH's HostCertificate) is trusted through a known_hosts
// "@cert-authority" line alone, as centres that sign their hosts' keys
// ask their users to do: the site connects and runs a job, in tunnel
// mode, whose placeholders pin the certified key the CLS saw. A CA not
// in known_hosts is refused as unknown.
func TestHostCertificate(t *testing.T) {
	need(t, "slurm")
	dir := t.TempDir()
	ca := filepath.Join(dir, "host_ca")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", ca).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	addr := freePort(t, "127.0.0.1")
	host, _, _ := net.SplitHostPort(addr)
	l := &login{t: t, dir: t.TempDir(), addr: addr, user: "mquser"}
	// startLogin makes the host key; sign it before sshd reads its config.
	l.extra = "HostCertificate " + filepath.Join(l.dir, "host_key-cert.pub") + "\n"
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(l.dir, "host_key")).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	if out, err := exec.Command("ssh-keygen", "-q", "-s", ca, "-I", "login", "-h", "-n", host, filepath.Join(l.dir, "host_key.pub")).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -s: %v %s", err, out)
	}
	l.knownHosts = filepath.Join(l.dir, "known_hosts")
	l.start()
	t.Cleanup(l.stop)
	caPub, err := os.ReadFile(ca + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, []byte("@cert-authority ["+host+"]:"+port+" "+string(caPub)), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other_ca")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	otherPub, err := os.ReadFile(other + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	khOther := filepath.Join(dir, "known_hosts.other")
	if err := os.WriteFile(khOther, []byte("@cert-authority ["+host+"]:"+port+" "+string(otherPub)), 0o600); err != nil {
		t.Fatal(err)
	}

	c := startCLS(t)
	add := func(name, known, connect string) {
		c.must("cls", "site", "add", name, "--type", "slurm", "--ssh", l.user+"@"+addr, "--key", clientKey, "--known-hosts", known,
			"--connect", connect, "--max", "1", "--walltime", "10m", "--idle", "3s")
	}
	add("signed", kh, "tunnel")
	add("othersigned", khOther, "direct")
	c.must("mqsub", "-q", "q", "j1", "echo one")
	eventually(t, 2*time.Minute, "the job done at the site whose host key a known CA signed", func() bool { return len(c.jobs("D")) == 1 })
	eventually(t, time.Minute, "the other CA's site refused", func() bool {
		s := c.sites()["othersigned"]
		return s.State == "degraded" && strings.Contains(s.Error, "which no @cert-authority line")
	})
	t.Logf("refused: %s", c.sites()["othersigned"].Error)
}
