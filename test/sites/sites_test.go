//go:build e2e

package sites

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// A 300-job DAG runs across an SGE, a Slurm and a PBS site at once (SGE
// and Slurm alone where PBS is not here): every job Done, every site used,
// and afterwards no placeholder left in any batch queue. The blast jobs
// wait for a gate that opens once every site runs one of them, so each
// site takes part however slowly its placeholders start (with 300 short
// jobs, a site that started late found the work done).
func TestDAGAcrossSites(t *testing.T) {
	need(t, "sge", "slurm")
	l := newLogin(t, "127.0.0.1")
	pl := pbsLoginIfHere(t)
	c := startCLSWith(t, nil, reachableFromPBS())
	c.addSite("grid", "sge", l, "--max", "2", "--walltime", "10m", "--idle", "3s")
	c.addSite("slurmy", "slurm", l, "--max", "2", "--walltime", "10m", "--idle", "3s")
	sites := []string{"grid", "slurmy"}
	if pl != nil {
		c.addSite("pro", "pbs", pl, "--max", "2", "--walltime", "10m", "--idle", "3s")
		sites = append(sites, "pro")
	} else {
		t.Logf("without a PBS site: %s", havePBS)
	}
	gate := filepath.Join(c.work, "gate")
	// setup -> 149 x (blast_i -> parse_i) -> summary: 300 jobs.
	var b strings.Builder
	b.WriteString(`{"target":"setup","command":"echo setup"}` + "\n")
	var parses []string
	for i := range 149 {
		fmt.Fprintf(&b, `{"target":"blast%d","prereqs":["setup"],"command":"while [ ! -e %s ]; do sleep 0.1; done; echo blast %d","est":1}`+"\n", i, gate, i)
		fmt.Fprintf(&b, `{"target":"parse%d","prereqs":["blast%d"],"command":"echo parse %d; sleep 0.05","est":1}`+"\n", i, i, i)
		parses = append(parses, fmt.Sprintf("%q", fmt.Sprintf("parse%d", i)))
	}
	fmt.Fprintf(&b, `{"target":"summary","prereqs":[%s],"command":"echo summary"}`+"\n", strings.Join(parses, ","))
	jobs := filepath.Join(c.home, "dag.jsonl")
	os.WriteFile(jobs, []byte(b.String()), 0o644)
	start := time.Now()
	c.must("mqsub", "-f", jobs)
	eventually(t, 3*time.Minute, fmt.Sprintf("every site (%v) running a job", sites), func() bool {
		at := map[string]bool{}
		for _, j := range c.jobs("E") {
			at[j.Site] = true
		}
		for _, s := range sites {
			if !at[s] {
				return false
			}
		}
		return true
	})
	t.Logf("every site running a job after %s", time.Since(start).Round(time.Millisecond))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 4*time.Minute, "300 jobs done", func() bool { return len(c.jobs("D")) == 300 })
	t.Logf("300 jobs done in %s", time.Since(start).Round(time.Millisecond))
	bySite := map[string]int{}
	for _, j := range c.jobs("") {
		bySite[j.Site]++
	}
	t.Logf("jobs per site: %v", bySite)
	for _, s := range sites {
		if bySite[s] == 0 {
			t.Errorf("jobs per site %v: every site should have run some", bySite)
		}
	}
	// Drained: queued placeholders cancelled, running ones exit when idle.
	eventually(t, time.Minute, "placeholders gone", func() bool {
		n := 0
		for _, s := range c.sites() {
			n += s.Queued + s.Running
		}
		return n == 0 && ourBatchJobs(t) == 0
	})
	for name, s := range c.sites() {
		if s.Exited == 0 {
			t.Errorf("site %s: no placeholder exited: %+v", name, s)
		}
	}
}

// A placeholder killed by the batch system while its job runs: the job is
// requeued (after its lease), a new placeholder is submitted and finishes
// it. While it runs, the batch system shows the site's walltime (10m) as
// the job's limit: our directive's syntax is the one it reads. The job
// waits for a gate that opens only once its second attempt runs, so the
// first is still running when its placeholder is killed, however slow the
// machine (a 6 s job had ended, and its placeholder exited, before a
// loaded machine got to the qdel).
func TestPlaceholderKilledMidJob(t *testing.T) {
	for _, tc := range []struct{ typ, kill, walltime, want string }{
		{"sge", "qdel", "qstat -j %s | grep -o 'h_rt=[0-9]*'", "h_rt=600"},
		{"slurm", "scancel", "squeue -h -j %s -o %%l", "10:00"},
		{"pbs", "qdel", "qstat -f %s | grep Resource_List.walltime", "Resource_List.walltime = 00:10:00"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			need(t, tc.typ)
			l := loginFor(t, tc.typ)
			var c *cls
			if tc.typ == "pbs" {
				c = startCLSWith(t, nil, reachableFromPBS())
			} else {
				c = startCLS(t)
			}
			site := "k" + tc.typ
			c.addSite(site, tc.typ, l, "--max", "1", "--walltime", "10m", "--idle", "3s")
			mark, gate := filepath.Join(c.work, "runs"), filepath.Join(c.work, "gate")
			c.must("mqsub", "-q", "q", "victim", fmt.Sprintf("echo run >> %s; while [ ! -e %s ]; do sleep 0.2; done; echo finished", mark, gate))
			eventually(t, time.Minute, "the job executing", func() bool { return len(c.jobs("E")) == 1 })
			ids := batchIDs(t, tc.typ, "mq-"+site+"-")
			if len(ids) != 1 {
				t.Fatalf("placeholders in the batch queue: %q", ids)
			}
			if out := asUserOf(t, tc.typ, fmt.Sprintf(tc.walltime, ids[0])); strings.TrimSpace(out) != tc.want {
				t.Errorf("the placeholder's walltime: %q, want %q", out, tc.want)
			}
			asUserOf(t, tc.typ, tc.kill+" "+ids[0])
			eventually(t, 2*time.Minute, "the job's second attempt executing", func() bool {
				js := c.jobs("E")
				return len(js) == 1 && js[0].Attempts == 2
			})
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			eventually(t, time.Minute, "the job done", func() bool { return len(c.jobs("D")) == 1 })
			js := c.jobs("D")
			if js[0].Attempts != 2 {
				t.Errorf("attempts %d, want 2 (one killed with its placeholder, one finished)", js[0].Attempts)
			}
			if runs, _ := os.ReadFile(mark); strings.Count(string(runs), "run") != 2 {
				t.Errorf("the job ran %d times, want 2", strings.Count(string(runs), "run"))
			}
			if out := c.must("mqstat", "--output", fmt.Sprint(js[0].ID)); !strings.Contains(out, "finished") {
				t.Errorf("output %q", out)
			}
		})
	}
}

// The login host unreachable for a while: the site is marked degraded
// with the reason, and recovers when the host is back.
func TestLoginHostUnreachable(t *testing.T) {
	need(t, "slurm")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	c.addSite("flaky", "slurm", l, "--max", "1", "--walltime", "10m", "--idle", "3s")
	// Let the CLS connect first (a connection being made while sshd stops
	// can slip past the kill), then take the host away under it.
	eventually(t, 30*time.Second, "the site connected", func() bool { return c.sites()["flaky"].State == "ok" })
	l.stop()
	c.must("mqsub", "-q", "q", "j1", "echo one")
	eventually(t, 30*time.Second, "degraded", func() bool {
		s := c.sites()["flaky"]
		return s.State == "degraded" && strings.Contains(s.Error, "cannot reach the login host")
	})
	t.Logf("degraded: %s", c.sites()["flaky"].Error)
	if out := c.must("cls", "site", "list"); !strings.Contains(out, "degraded") {
		t.Errorf("cls site list does not show degraded:\n%s", out)
	}
	l.start()
	eventually(t, 60*time.Second, "recovered and the job done", func() bool {
		return c.sites()["flaky"].State == "ok" && len(c.jobs("D")) == 1
	})
}

// A login host whose key is not the one in known_hosts is refused with a
// clear message, and nothing is submitted there.
func TestChangedHostKey(t *testing.T) {
	need(t, "sge")
	l := newLogin(t, "127.0.0.1")
	other := filepath.Join(t.TempDir(), "other")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	l.writeKnownHosts(other + ".pub") // known_hosts now names another key for this host
	c := startCLS(t)
	c.addSite("spoofed", "sge", l, "--max", "1")
	c.must("mqsub", "-q", "q", "j", "true")
	eventually(t, 20*time.Second, "refused", func() bool {
		s := c.sites()["spoofed"]
		return s.State == "degraded" && strings.Contains(s.Error, "the login host's key has changed")
	})
	msg := c.sites()["spoofed"].Error
	t.Logf("refused: %s", msg)
	if !strings.Contains(msg, "SHA256:") || !strings.Contains(msg, "ssh-keygen -R") {
		t.Errorf("message does not name the keys and the fix: %s", msg)
	}
	if log, _ := os.ReadFile(filepath.Join(l.dir, "sshd.log")); strings.Contains(string(log), "Accepted publickey") {
		t.Errorf("the CLS authenticated to a host with a changed key:\n%s", log)
	}
	if n := batchJobsNamed(t, "mq-spoofed-"); n != 0 {
		t.Errorf("%d placeholders submitted", n)
	}
}

// Tunnel mode on SGE: the CLS runs in a network namespace that compute
// nodes (this host's batch systems) cannot reach; its SSH connection to the
// login host opens a reverse forward on the login host's loopback, and the
// placeholders reach it through the login host's sshd. (TestTunnelStockSSHD
// has the login host on another address than the compute nodes.)
func TestTunnel(t *testing.T) {
	need(t, "sge")
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2) for network namespaces")
	}
	ns := fmt.Sprintf("mqtun%d", os.Getpid()%10000)
	hostIf, nsIf := ns+"h", ns+"n"
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	sh("netns", "add", ns)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", ns).Run()
		exec.Command("ip", "link", "del", hostIf).Run()
	})
	sh("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	sh("link", "set", nsIf, "netns", ns)
	sh("addr", "add", "10.203.0.1/24", "dev", hostIf)
	sh("link", "set", hostIf, "up")
	sh("-n", ns, "addr", "add", "10.203.0.2/24", "dev", nsIf)
	sh("-n", ns, "link", "set", nsIf, "up")
	sh("-n", ns, "link", "set", "lo", "up")

	l := newLogin(t, "10.203.0.1") // the login host: reachable from the CLS's namespace
	c := startCLS(t, "ip", "netns", "exec", ns)
	// The CLS's SSH endpoint is on the namespace's loopback: from here
	// (where the compute nodes are) it is not there.
	m := sshRE.FindStringSubmatch(c.stderr.String())
	if m == nil {
		t.Fatalf("no SSH address in %q", c.stderr)
	}
	if conn, err := net.DialTimeout("tcp", m[1], time.Second); err == nil {
		conn.Close()
		t.Logf("note: %s is reachable from the host namespace (something else listens there)", m[1])
	}
	c.addSite("tun", "sge", l, "--max", "2", "--walltime", "10m", "--idle", "3s", "--connect", "tunnel")
	for i := range 6 {
		c.must("mqsub", "-q", "q", fmt.Sprintf("t%d", i), "hostname")
	}
	eventually(t, 90*time.Second, "jobs done through the tunnel", func() bool { return len(c.jobs("D")) == 6 })
	// This CLS's script: its directory is named for the CLS's id, the
	// first 3 bytes of the SHA-256 of its host key's fingerprint (other
	// runs' CLSs leave theirs beside it).
	sum := sha256.Sum256([]byte(m[2]))
	script, err := os.ReadFile(filepath.Join("/home/mquser/.mq-sites", hex.EncodeToString(sum[:3]), "tun/placeholder.sh"))
	if err != nil {
		t.Fatalf("no placeholder script on the login host: %v", err)
	}
	if !strings.Contains(string(script), "--cls 127.0.0.1:") || !strings.Contains(string(script), "--via mquser@10.203.0.1:") {
		t.Errorf("placeholders do not reach the forward through the login host:\n%s", script)
	}

	// A placeholder runs a job through the tunnel while the site is set
	// anew (--idle reopens it) and while the CLS is killed and started
	// again: the forward keeps its port, the placeholder finds the CLS
	// there, and the job ends done in its first attempt.
	scriptPath := filepath.Join("/home/mquser/.mq-sites", hex.EncodeToString(sum[:3]), "tun/placeholder.sh")
	portOf := func() string {
		b, err := os.ReadFile(scriptPath)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`--cls 127\.0\.0\.1:([0-9]+)`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("no tunnel port in the script:\n%s", b)
		}
		return string(m[1])
	}
	port := portOf()
	gate := filepath.Join(os.TempDir(), fmt.Sprintf("mqtun-gate-%d", os.Getpid()))
	os.Remove(gate)
	t.Cleanup(func() { os.Remove(gate) })
	id := strings.TrimSpace(c.must("mqsub", "-q", "q", "long", fmt.Sprintf("while [ ! -e %s ]; do sleep 0.2; done", gate)))
	eventually(t, 90*time.Second, "the long job executing", func() bool { return len(c.jobs("E")) == 1 })
	c.must("cls", "site", "set", "tun", "--idle", "5s")
	c.kill()
	c.restart()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var j protocol.JobDetail
	eventually(t, 3*time.Minute, "the long job done", func() bool {
		if err := json.Unmarshal([]byte(c.must("mqstat", "-j", id, "--json")), &j); err != nil {
			t.Fatal(err)
		}
		return j.State == "D" || j.State == "F"
	})
	if j.State != "D" || j.Attempts != 1 {
		t.Errorf("the job that ran across the set and the restart: state %s, %d attempts; want D in 1", j.State, j.Attempts)
	}
	if got := portOf(); got != port {
		t.Errorf("the tunnel's port went from %s to %s", port, got)
	}
}

// Throttling shifts work to the site that starts placeholders sooner. The
// SGE site's placeholders (and the PBS site's, where PBS is here) are
// submitted held (qsub -h), so they wait in the queue as on a busy cluster
// (a hold touches only our jobs, not the shared queue); Slurm starts its
// own. After --site-throttle the held sites are throttled: each keeps one
// queued probe and cancels the others, and the work is done on Slurm.
// Releasing a probe (the queue moves again) recovers its site, and the
// probe takes work.
//
// The jobs wait for a gate file, so the work cannot drain before the
// probes take some, however slow the machine: Slurm's placeholders hold
// one job each until the gate opens, the others stay ready, and a
// throttled site keeps its probe while there is ready work. (With jobs of
// fixed length, on a loaded machine Slurm had done them all before the
// probe was released or before it started.)
func TestThrottleShiftsWork(t *testing.T) {
	need(t, "sge", "slurm")
	l := newLogin(t, "127.0.0.1")
	pl := pbsLoginIfHere(t)
	// Slurm must start its placeholders well within the throttle time, also
	// on a loaded machine (the e2e suites run in parallel), or it is
	// throttled too (for a while: the checks below wait it out).
	c := startCLSWith(t, nil, append(reachableFromPBS(), "--site-throttle", "8s"))
	slow := map[string]string{"slowq": "sge"} // site -> batch system
	c.addSite("slowq", "sge", l, "--max", "3", "--walltime", "10m", "--idle", "3s", "--submit-args=-h")
	if pl != nil {
		c.addSite("slowp", "pbs", pl, "--max", "3", "--walltime", "10m", "--idle", "3s", "--submit-args=-h")
		slow["slowp"] = "pbs"
	} else {
		t.Logf("without a PBS site: %s", havePBS)
	}
	c.addSite("fastq", "slurm", l, "--max", "2", "--walltime", "10m", "--idle", "3s")
	gate := filepath.Join(c.work, "gate")
	var b strings.Builder
	const n = 20
	for i := range n {
		fmt.Fprintf(&b, `{"target":"w%d","command":"while [ ! -e %s ]; do sleep 0.2; done","est":3}`+"\n", i, gate)
	}
	jobs := filepath.Join(c.home, "work.jsonl")
	os.WriteFile(jobs, []byte(b.String()), 0o644)
	c.must("mqsub", "-f", jobs)
	executingAt := func(site string) int {
		k := 0
		for _, j := range c.jobs("E") {
			if j.Site == site {
				k++
			}
		}
		return k
	}

	mostQueued := map[string]int{}
	eventually(t, 60*time.Second, "the held sites throttled with one queued probe each", func() bool {
		all := c.sites()
		throttled := true
		for site := range slow {
			s := all[site]
			mostQueued[site] = max(mostQueued[site], s.Queued)
			throttled = throttled && s.State == "throttled" && s.Queued == 1
		}
		return throttled
	})
	for site, typ := range slow {
		if mostQueued[site] < 2 {
			t.Errorf("the %s site had at most %d placeholders queued; want its max (3) before throttling", typ, mostQueued[site])
		}
		// The cancelled ones leave the batch queue; the probe stays.
		eventually(t, 30*time.Second, "one "+typ+" placeholder left", func() bool { return len(batchIDs(t, typ, "mq-"+site+"-")) == 1 })
	}
	eventually(t, 60*time.Second, "the Slurm site ok with its max 2 placeholders running a job each", func() bool {
		s := c.sites()["fastq"]
		return s.State == "ok" && s.Running == 2 && executingAt("fastq") == 2
	})
	for site, typ := range slow {
		if s := c.sites()[site]; s.State != "throttled" || s.Queued != 1 || s.Running != 0 {
			t.Errorf("%s site %s with %d queued, %d running: want throttled with its probe", typ, s.State, s.Queued, s.Running)
		}
	}
	for _, j := range c.jobs("DE") {
		if slow[j.Site] != "" {
			t.Errorf("job %d ran at the throttled site %s", j.ID, j.Site)
		}
	}

	// The queue moves again: the probe starts, the site recovers and works.
	// (Its new placeholders are held too, and throttle it again 8 s later.)
	for site, typ := range slow {
		probe := batchIDs(t, typ, "mq-"+site+"-")
		if len(probe) != 1 {
			t.Fatalf("%s placeholders %q, want the one probe", typ, probe)
		}
		asUserOf(t, typ, "qrls "+probe[0])
		eventually(t, 60*time.Second, "the "+typ+" site recovered, its probe running", func() bool {
			s := c.sites()[site]
			return s.State == "ok" && s.Running >= 1
		})
		eventually(t, 60*time.Second, "the "+typ+" probe running a job", func() bool { return executingAt(site) == 1 })
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "all jobs done", func() bool { return len(c.jobs("D")) == n })
	bySite := map[string]int{}
	for _, j := range c.jobs("D") {
		bySite[j.Site]++
	}
	t.Logf("jobs per site: %v", bySite)
	for _, site := range append(slices.Collect(maps.Keys(slow)), "fastq") {
		if bySite[site] == 0 {
			t.Errorf("jobs per site %v: want most on Slurm and some on each recovered site", bySite)
		}
	}
}

// A site told to dial the CLS where it does not answer (--cls-addr: the
// address compute nodes use when this host's name is not one they can
// reach) degrades naming that address; cls site set --cls-addr mends it
// in place, with the CLS's own port when it names none, and the jobs run.
func TestCLSAddr(t *testing.T) {
	need(t, "slurm")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	c.addSite("via", "slurm", l, "--max", "1", "--walltime", "10m", "--idle", "3s", "--connect-timeout", "20s", "--cls-addr", "127.0.0.1:1")
	for i := range 2 {
		c.must("mqsub", "-q", "q", fmt.Sprintf("j%d", i), "true")
	}
	eventually(t, 3*time.Minute, "the site degraded", func() bool { return c.sites()["via"].State == "degraded" })
	msg := c.sites()["via"].Error
	for _, want := range []string{"127.0.0.1:1 (the site's --cls-addr)", "cls site set via --cls-addr HOST[:PORT]"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the site's error lacks %q: %s", want, msg)
		}
	}
	if js := c.jobs("Q"); len(js) != 2 {
		t.Errorf("%d jobs queued, want both", len(js))
	}
	out := c.must("cls", "site", "set", "via", "--cls-addr", "127.0.0.1")
	if !strings.Contains(out, "nodes dial the CLS at 127.0.0.1") {
		t.Errorf("cls site set printed:\n%s", out)
	}
	eventually(t, 3*time.Minute, "both jobs done", func() bool { return len(c.jobs("D")) == 2 })
}
