//go:build e2e

package sites

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// testNet is three hosts on this machine: the login host (a network
// namespace running a stock sshd), the CLS's host (another namespace), and
// this host, where the batch systems run placeholders: the compute nodes.
// The CLS and the compute nodes reach the login host at loginIP; the
// compute nodes cannot reach the CLS, and the login host's loopback is its
// own.
type testNet struct {
	login, cls string // namespaces
	loginIP    string
}

// newTestNet makes the namespaces and links:
//
//	compute nodes (here) 10.206.0.1 -- 10.206.0.2 login host 10.207.0.2 -- 10.207.0.1 CLS
//
// with a route here to 10.207.0.2 through the login host's near end, so
// every host names the login host by one address. The login host does not
// forward (a new namespace's default), so the CLS stays out of reach. Its
// /etc/hosts (ip netns exec mounts /etc/netns/NS/hosts over it) names this
// host by its near address, so sbatch there reaches slurmctld here.
func newTestNet(t *testing.T) *testNet {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2) for network namespaces")
	}
	id := os.Getpid() % 10000
	n := &testNet{login: fmt.Sprintf("mql%d", id), cls: fmt.Sprintf("mqc%d", id), loginIP: "10.207.0.2"}
	here := n.login + "h" // this host's end of the login host's link
	etc := filepath.Join("/etc/netns", n.login)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", n.login).Run()
		exec.Command("ip", "netns", "del", n.cls).Run()
		exec.Command("ip", "link", "del", here).Run()
		os.RemoveAll(etc)
		os.Remove("/etc/netns") // only if empty
	})
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", n.login)
	ip("netns", "add", n.cls)
	ip("link", "add", here, "type", "veth", "peer", "name", n.login+"c")
	ip("link", "set", n.login+"c", "netns", n.login)
	ip("addr", "add", "10.206.0.1/24", "dev", here)
	ip("link", "set", here, "up")
	ip("-n", n.login, "addr", "add", "10.206.0.2/24", "dev", n.login+"c")
	ip("link", "add", n.cls+"l", "type", "veth", "peer", "name", n.cls+"c")
	ip("link", "set", n.cls+"l", "netns", n.login)
	ip("link", "set", n.cls+"c", "netns", n.cls)
	ip("-n", n.login, "addr", "add", "10.207.0.2/24", "dev", n.cls+"l")
	ip("-n", n.cls, "addr", "add", "10.207.0.1/24", "dev", n.cls+"c")
	for _, l := range []struct{ ns, dev string }{{n.login, n.login + "c"}, {n.login, n.cls + "l"}, {n.cls, n.cls + "c"}, {n.login, "lo"}, {n.cls, "lo"}} {
		ip("-n", l.ns, "link", "set", l.dev, "up")
	}
	ip("route", "add", n.loginIP+"/32", "via", "10.206.0.2")
	host, _ := os.Hostname()
	os.MkdirAll(etc, 0o755)
	if err := os.WriteFile(filepath.Join(etc, "hosts"), []byte("127.0.0.1 localhost\n10.206.0.1 "+host+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

var portRE = regexp.MustCompile(`--cls 127\.0\.0\.1:(\d+)`)

// Tunnel mode with a stock sshd on a login host that is not a compute
// node: Debian's sshd_config (GatewayPorts no) binds the CLS's reverse
// forward to the login host's loopback, which compute nodes cannot dial;
// placeholders log in to the login host with their key and reach the
// forward from there. The key can do nothing else there: no shell, no
// other port, no listening; and it is gone when the site is.
func TestTunnelStockSSHD(t *testing.T) {
	need(t, "slurm")
	n := newTestNet(t)
	l := newStockLoginIn(t, n.login, n.loginIP+":2222")
	c := startCLS(t, "ip", "netns", "exec", n.cls)
	m := sshRE.FindStringSubmatch(c.stderr.String())
	if m == nil {
		t.Fatalf("no SSH address in %q", c.stderr)
	}
	c.addSite("tun", "slurm", l, "--max", "2", "--walltime", "10m", "--idle", "3s", "--connect", "tunnel", "--connect-timeout", "90s")
	for i := range 6 {
		c.must("mqsub", "-q", "q", fmt.Sprintf("t%d", i), "hostname")
	}
	eventually(t, 2*time.Minute, "jobs done through the tunnel", func() bool { return len(c.jobs("D")) == 6 })
	if s := c.sites()["tun"]; s.State != "ok" {
		t.Errorf("site %s: %s", s.State, s.Error)
	}

	// This CLS's script: earlier runs' are there too (other CLS ids).
	var script []byte
	var scriptPath string
	all, _ := filepath.Glob("/home/mquser/.mq-sites/*/tun/placeholder.sh")
	for _, p := range all {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), "--host-key "+m[2]) {
			script, scriptPath = b, p
		}
	}
	if script == nil {
		t.Fatalf("no placeholder script pinning %s among %v", m[2], all)
	}
	pm := portRE.FindStringSubmatch(string(script))
	if pm == nil || !strings.Contains(string(script), "--via mquser@"+l.addr) || !strings.Contains(string(script), "--via-host-key 'ssh-ed25519 ") {
		t.Fatalf("placeholders do not reach the forward through the login host:\n%s", script)
	}
	// The forward is on the login host's loopback only: from here its
	// port on the login host's address is closed.
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(n.loginIP, pm[1]), 2*time.Second); err == nil {
		conn.Close()
		t.Errorf("the forward is reachable at %s:%s: GatewayPorts is not the default here", n.loginIP, pm[1])
	}
	// This CLS's line: other tests' CLSs (TestTunnel's site is also
	// "tun") share mquser's authorized_keys, each marked with its CLS id,
	// the name of the directory its scripts are in.
	mark := "mq-tunnel:mq-tun-" + filepath.Base(filepath.Dir(filepath.Dir(scriptPath)))
	ak, _ := os.ReadFile("/home/mquser/.ssh/authorized_keys")
	var line string
	for _, l := range strings.Split(string(ak), "\n") {
		if strings.HasSuffix(l, " "+mark) {
			line = l
		}
	}
	if want := `restrict,port-forwarding,permitopen="127.0.0.1:` + pm[1] + `",permitlisten="127.0.0.1:1",command="/bin/false" ssh-ed25519 `; !strings.HasPrefix(line, want) {
		t.Errorf("authorized_keys line %q, want it to start %q", line, want)
	}

	// What a stolen placeholder key gets on the login host.
	key := filepath.Join(filepath.Dir(scriptPath), "key")
	_, port, _ := net.SplitHostPort(l.addr)
	ssh := func(args ...string) (string, error) {
		base := []string{"-p", port, "-i", key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
			"-o", "UserKnownHostsFile=" + l.knownHosts, "-o", "ConnectTimeout=20", "-o", "ExitOnForwardFailure=yes"}
		cmd := exec.Command("timeout", append([]string{"30", "ssh"}, append(append(base, args...), "mquser@"+n.loginIP)...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, _ := ssh("-T"); strings.Contains(out, "uid=") {
		t.Errorf("a shell: %s", out)
	}
	if out, err := ssh("-T", "-o", "RemoteCommand=id"); err == nil || strings.Contains(out, "uid=") {
		t.Errorf("a command ran: %v %s", err, out)
	}
	if out, err := ssh("-W", "127.0.0.1:2222"); err == nil || !strings.Contains(out, "prohibited") {
		t.Errorf("a connection to another port: %v %s", err, out)
	}
	if out, err := ssh("-N", "-R", "127.0.0.1:40123:127.0.0.1:9"); err == nil || !strings.Contains(out, "forwarding failed") {
		t.Errorf("listening on the login host: %v %s", err, out)
	}
	if log, _ := os.ReadFile(filepath.Join(l.dir, "sshd.log")); !strings.Contains(string(log), "but the request was denied") {
		t.Logf("sshd.log:\n%s", tail(string(log), 20))
	}

	c.must("cls", "site", "remove", "tun")
	if ak, _ := os.ReadFile("/home/mquser/.ssh/authorized_keys"); strings.Contains(string(ak), " "+mark+"\n") || strings.HasSuffix(string(ak), " "+mark) {
		t.Errorf("the placeholder key is still authorized after the site was removed:\n%s", ak)
	}
}

// Placeholders that start but cannot reach the CLS (here: direct mode,
// told the CLS's address in a namespace compute nodes cannot reach) are
// cancelled after --connect-timeout, and the site is degraded with the
// agent's own error and what to check, instead of burning its walltime.
func TestNeverConnectedDegrades(t *testing.T) {
	need(t, "slurm")
	n := newTestNet(t)
	l := newStockLoginIn(t, n.login, n.loginIP+":2222")
	c := startCLS(t, "ip", "netns", "exec", n.cls)
	c.addSite("lost", "slurm", l, "--max", "2", "--walltime", "10m", "--idle", "3s", "--connect-timeout", "15s")
	for i := range 4 {
		c.must("mqsub", "-q", "q", fmt.Sprintf("j%d", i), "true")
	}
	eventually(t, 3*time.Minute, "the site degraded", func() bool { return c.sites()["lost"].State == "degraded" })
	msg := c.sites()["lost"].Error
	t.Logf("degraded: %s", msg)
	for _, want := range []string{"without connecting to the CLS", "connection refused", "check that compute nodes can reach it"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the site's error lacks %q: %s", want, msg)
		}
	}
	if out := c.must("cls", "site", "list"); !strings.Contains(out, "degraded") || !strings.Contains(out, "connection refused") {
		t.Errorf("cls site list:\n%s", out)
	}
	if log, _ := os.ReadFile(filepath.Join(c.home, "cls.log")); !strings.Contains(string(log), "placeholders ran without connecting") {
		t.Errorf("cls.log does not say so:\n%s", tail(string(log), 20))
	}
	// The stalled site keeps one probe, not its max, and no job is lost.
	eventually(t, time.Minute, "at most one placeholder left", func() bool { return batchJobsNamed(t, "mq-lost-") <= 1 })
	if js := c.jobs("Q"); len(js) != 4 {
		t.Errorf("%d jobs queued, want all 4", len(js))
	}
}
