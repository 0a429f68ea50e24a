//go:build e2e

package sites

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A network cut between the CLS and a cluster, longer than the lease:
// the CLS cannot list the site, and the placeholder cannot reach the CLS.
// The job runs on and ends behind the cut; when the cut heals its
// placeholder reconnects and reports, and the job is Done in its first
// attempt, run once (before --partition-grace it was requeued at the
// lease and run again).
func TestPartitionKeepsJobs(t *testing.T) {
	need(t, "slurm")
	l := newLogin(t, "127.0.0.1")
	// Both ways through the cluster's network: the CLS to the login
	// host, the compute nodes to the CLS. Made before the CLS, and healed
	// before it stops (cleanups run last first): its stop cancels the
	// site's placeholders through them.
	clsAddr := freePort(t, "127.0.0.1")
	toLogin, toCLS := newCutProxy(t, l.addr), newCutProxy(t, clsAddr)
	c := startCLSWith(t, nil, []string{"--lease", "6s", "--ssh", clsAddr})
	t.Cleanup(func() { toLogin.heal(); toCLS.heal() }) // before the CLS stops, if the test ends during the cut
	via := *l
	via.addr, via.knownHosts = toLogin.addr(), filepath.Join(t.TempDir(), "known_hosts")
	via.writeKnownHosts(filepath.Join(l.dir, "host_key.pub"))
	c.addSite("cut", "slurm", &via, "--max", "1", "--walltime", "10m", "--idle", "30s", "--cls-addr", toCLS.addr())
	mark, gate := filepath.Join(c.work, "runs"), filepath.Join(c.work, "gate")
	c.must("mqsub", "-q", "q", "long", fmt.Sprintf("echo run >> %s; while [ ! -e %s ]; do sleep 0.2; done; echo finished", mark, gate))
	eventually(t, 2*time.Minute, "the job executing", func() bool { return len(c.jobs("E")) == 1 && readFile(mark) != "" })

	toLogin.cut()
	toCLS.cut()
	cutAt := time.Now()
	eventually(t, time.Minute, "the site degraded", func() bool { return c.sites()["cut"].State == "degraded" })
	// Four leases and more with neither way open: the job is still the
	// placeholder's, in its first attempt.
	eventually(t, time.Minute, "four leases passed", func() bool { return time.Since(cutAt) > 24*time.Second })
	if js := c.jobs("E"); len(js) != 1 || js[0].Attempts != 1 {
		t.Fatalf("behind the cut: executing %+v, want the job in attempt 1", js)
	}
	// cls site list says so: the site does not answer, and the CLS holds
	// its placeholder's lease.
	eventually(t, time.Minute, "cls site list saying the site is cut off and its job held", func() bool {
		for _, line := range strings.Split(c.must("cls", "site", "list"), "\n") {
			if strings.HasPrefix(line, "cut ") {
				return strings.Contains(line, "unreachable since ") && strings.Contains(line, "1 placeholder's 1 job held until ")
			}
		}
		return false
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil { // it ends behind the cut
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the job's end behind the cut", func() bool { return time.Since(cutAt) > 30*time.Second })
	toLogin.heal()
	toCLS.heal()

	eventually(t, 2*time.Minute, "the job done", func() bool { return len(c.jobs("D")) == 1 })
	js := c.jobs("D")
	if js[0].Attempts != 1 {
		t.Errorf("attempts %d, want 1", js[0].Attempts)
	}
	if runs := readFile(mark); strings.Count(runs, "run") != 1 {
		t.Errorf("the job ran %d times, want once", strings.Count(runs, "run"))
	}
	if out := c.must("mqstat", "--output", fmt.Sprint(js[0].ID)); !strings.Contains(out, "finished") {
		t.Errorf("output %q", out)
	}
}

// cutProxy forwards TCP connections to an address until cut: then it
// drops those open and holds new ones unanswered, as a network that
// drops every packet does, until healed.
type cutProxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	down  bool
	open  []net.Conn        // clients' connections, and those held
	ups   []net.Conn        // to the address, for the clients open
	stale map[net.Conn]bool // to the address, left open by cutStale
}

func newCutProxy(t *testing.T, to string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, to: to, stale: map[net.Conn]bool{}}
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.mu.Lock()
		defer p.mu.Unlock()
		for up := range p.stale {
			up.Close()
		}
	})
	go p.serve()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.open = append(p.open, c)
		p.mu.Unlock()
		if down {
			continue // held unanswered; closed at the heal
		}
		go p.forward(c)
	}
}

func (p *cutProxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.to, 10*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		up.Close()
		return
	}
	p.ups = append(p.ups, up)
	p.mu.Unlock()
	go func() {
		io.Copy(up, c)
		p.mu.Lock()
		stale := p.stale[up]
		p.mu.Unlock()
		if !stale {
			up.Close()
		}
	}()
	io.Copy(c, up)
	c.Close()
}

// cut drops every connection and holds new ones.
func (p *cutProxy) cut() { p.drop(false) }

// cutStale drops the clients' connections and holds new ones, but leaves
// their connections to the address open and silent until the test ends:
// the far end never hears of the cut.
func (p *cutProxy) cutStale() { p.drop(true) }

func (p *cutProxy) drop(keepUps bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, up := range p.ups {
		if keepUps {
			p.stale[up] = true
		} else {
			up.Close()
		}
	}
	for _, c := range p.open {
		c.Close()
	}
	p.open, p.ups = nil, nil
}

// heal closes the connections held, which their clients then make again,
// and forwards the new ones.
func (p *cutProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
	for _, c := range p.open {
		c.Close()
	}
	p.open = nil
}

// A cut in tunnel mode that leaves the login host's end of the CLS's
// connection open (a firewall that reset only the CLS's end, or a CLS
// that gave up on a silent connection first): the login host's sshd keeps
// that dead connection's reverse forward on its port, which is where the
// running placeholders dial the CLS. When the cut heals the CLS must have
// that port again, ending the stale session, rather than open its forward
// on a port no running placeholder knows: the job, which ended behind the
// cut, is Done in its first attempt, and the port has not moved.
func TestTunnelCutLeavesStaleForward(t *testing.T) {
	need(t, "slurm")
	l := newLogin(t, "127.0.0.1")
	toLogin := newCutProxy(t, l.addr)
	c := startCLSWith(t, nil, []string{"--lease", "6s"})
	t.Cleanup(toLogin.heal) // before the CLS stops, if the test ends during the cut
	via := *l
	via.addr, via.knownHosts = toLogin.addr(), filepath.Join(t.TempDir(), "known_hosts")
	via.writeKnownHosts(filepath.Join(l.dir, "host_key.pub"))
	c.addSite("stale", "slurm", &via, "--max", "1", "--walltime", "10m", "--idle", "30s", "--connect", "tunnel")
	mark, gate := filepath.Join(c.work, "runs"), filepath.Join(c.work, "gate")
	c.must("mqsub", "-q", "q", "long", fmt.Sprintf("echo run >> %s; while [ ! -e %s ]; do sleep 0.2; done; echo finished", mark, gate))
	eventually(t, 2*time.Minute, "the job executing", func() bool { return len(c.jobs("E")) == 1 && readFile(mark) != "" })
	port := tunnelPort(t, c, "stale")

	toLogin.cutStale()
	cutAt := time.Now()
	eventually(t, time.Minute, "the site degraded", func() bool { return c.sites()["stale"].State == "degraded" })
	eventually(t, time.Minute, "four leases passed", func() bool { return time.Since(cutAt) > 24*time.Second })
	if err := os.WriteFile(gate, nil, 0o644); err != nil { // it ends behind the cut
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the job's end behind the cut", func() bool { return time.Since(cutAt) > 30*time.Second })
	toLogin.heal()

	eventually(t, 2*time.Minute, "the job done", func() bool { return len(c.jobs("D")) == 1 })
	if js := c.jobs("D"); js[0].Attempts != 1 {
		t.Errorf("attempts %d, want 1", js[0].Attempts)
	}
	if runs := readFile(mark); strings.Count(runs, "run") != 1 {
		t.Errorf("the job ran %d times, want once", strings.Count(runs, "run"))
	}
	if got := tunnelPort(t, c, "stale"); got != port {
		t.Errorf("the tunnel's port went from %s to %s: running placeholders do not know it", port, got)
	}
}

// tunnelPort is the port of site's reverse forward on its login host, as
// c's placeholder script for it says (other CLSs' scripts lie beside it).
func tunnelPort(t *testing.T, c *cls, site string) string {
	t.Helper()
	m := sshRE.FindStringSubmatch(c.stderr.String())
	if m == nil {
		t.Fatalf("no SSH address in %q", c.stderr)
	}
	all, _ := filepath.Glob("/home/mquser/.mq-sites/*/" + site + "/placeholder.sh")
	for _, p := range all {
		if b := readFile(p); strings.Contains(b, "--host-key "+m[2]) {
			if pm := portRE.FindStringSubmatch(b); pm != nil {
				return pm[1]
			}
			t.Fatalf("no tunnel port in %s:\n%s", p, b)
		}
	}
	t.Fatalf("no placeholder script pinning %s among %v", m[2], all)
	return ""
}
