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
)

// A 300-job DAG runs across an SGE site and a Slurm site at once: every job
// Done, both sites used, and afterwards no placeholder left in either
// batch queue. The jobs take 50 ms each, so the work outlasts a site's
// cold start: sites share the work (one ready setup job warrants one
// placeholder, at one site), and 300 echo jobs were done by Slurm's two
// placeholders before SGE's had started.
func TestDAGAcrossSGEAndSlurm(t *testing.T) {
	need(t, "sge", "slurm")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	c.addSite("grid", "sge", l, "--max", "2", "--walltime", "10m", "--idle", "3s")
	c.addSite("slurmy", "slurm", l, "--max", "2", "--walltime", "10m", "--idle", "3s")
	// setup -> 149 x (blast_i -> parse_i) -> summary: 300 jobs.
	var b strings.Builder
	b.WriteString(`{"target":"setup","command":"echo setup"}` + "\n")
	var parses []string
	for i := range 149 {
		fmt.Fprintf(&b, `{"target":"blast%d","prereqs":["setup"],"command":"echo blast %d; sleep 0.05","est":1}`+"\n", i, i)
		fmt.Fprintf(&b, `{"target":"parse%d","prereqs":["blast%d"],"command":"echo parse %d; sleep 0.05","est":1}`+"\n", i, i, i)
		parses = append(parses, fmt.Sprintf("%q", fmt.Sprintf("parse%d", i)))
	}
	fmt.Fprintf(&b, `{"target":"summary","prereqs":[%s],"command":"echo summary"}`+"\n", strings.Join(parses, ","))
	jobs := filepath.Join(c.home, "dag.jsonl")
	os.WriteFile(jobs, []byte(b.String()), 0o644)
	start := time.Now()
	c.must("mqsub", "-f", jobs)
	eventually(t, 4*time.Minute, "300 jobs done", func() bool { return len(c.jobs("D")) == 300 })
	t.Logf("300 jobs done in %s", time.Since(start).Round(time.Millisecond))
	bySite := map[string]int{}
	for _, j := range c.jobs("") {
		bySite[j.Site]++
	}
	t.Logf("jobs per site: %v", bySite)
	if bySite["grid"] == 0 || bySite["slurmy"] == 0 {
		t.Errorf("jobs per site %v: both sites should have run some", bySite)
	}
	// Drained: queued placeholders cancelled, running ones exit when idle.
	eventually(t, time.Minute, "placeholders gone", func() bool {
		s := c.sites()
		return s["grid"].Queued+s["grid"].Running+s["slurmy"].Queued+s["slurmy"].Running == 0 && ourBatchJobs(t) == 0
	})
	if s := c.sites(); s["grid"].Exited == 0 || s["slurmy"].Exited == 0 {
		t.Errorf("sites: %+v", s)
	}
}

// A placeholder killed by the batch system while its job runs: the job is
// requeued (after its lease), a new placeholder is submitted and finishes
// it.
func TestPlaceholderKilledMidJob(t *testing.T) {
	for _, tc := range []struct{ typ, kill, list string }{
		{"sge", "qdel", "qstat -u mquser | awk '/ mq-/ {print $1}'"},
		{"slurm", "scancel", "squeue -h -u mquser -o '%i %j' | awk '$2 ~ /^mq-/ {print $1}'"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			need(t, tc.typ)
			l := newLogin(t, "127.0.0.1")
			c := startCLS(t)
			c.addSite("k"+tc.typ, tc.typ, l, "--max", "1", "--walltime", "10m", "--idle", "3s")
			mark := filepath.Join(c.work, "runs")
			c.must("mqsub", "-q", "q", "victim", fmt.Sprintf("echo run >> %s; sleep 6; echo finished", mark))
			eventually(t, time.Minute, "the job executing", func() bool { return len(c.jobs("E")) == 1 })
			ids := strings.Fields(asUser(t, tc.list))
			if len(ids) != 1 {
				t.Fatalf("placeholders in the batch queue: %q", ids)
			}
			asUser(t, tc.kill+" "+ids[0])
			eventually(t, 90*time.Second, "the job done", func() bool { return len(c.jobs("D")) == 1 })
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
	scripts, _ := filepath.Glob("/home/mquser/.mq-sites/*/tun/placeholder.sh")
	if len(scripts) == 0 {
		t.Fatal("no placeholder script on the login host")
	}
	script, _ := os.ReadFile(scripts[0])
	if !strings.Contains(string(script), "--cls 127.0.0.1:") || !strings.Contains(string(script), "--via mquser@10.203.0.1:") {
		t.Errorf("placeholders do not reach the forward through the login host:\n%s", script)
	}
}

// Throttling shifts work to the site that starts placeholders sooner. SGE's
// placeholders are submitted held (qsub -h), so they wait in its queue as
// on a busy cluster (a hold touches only our jobs, not the shared queue);
// Slurm starts its own. After --site-throttle the SGE site is throttled:
// it keeps one queued probe and cancels the others, and the work is done
// on Slurm. Releasing the probe (the queue moves again) recovers the site,
// and the probe takes work.
func TestThrottleShiftsWork(t *testing.T) {
	need(t, "sge", "slurm")
	l := newLogin(t, "127.0.0.1")
	// Slurm must start its placeholders well within the throttle time, also
	// on a loaded machine (the e2e suites run in parallel), or it is
	// throttled too.
	c := startCLSWith(t, nil, []string{"--site-throttle", "8s"})
	c.addSite("slowq", "sge", l, "--max", "3", "--walltime", "10m", "--idle", "3s", "--submit-args=-h")
	c.addSite("fastq", "slurm", l, "--max", "2", "--walltime", "10m", "--idle", "3s")
	var b strings.Builder
	const n = 20 // 2 s each: Slurm alone needs ~20 s, so work is left when the probe starts
	for i := range n {
		fmt.Fprintf(&b, `{"target":"w%d","command":"sleep 2","est":3}`+"\n", i)
	}
	jobs := filepath.Join(c.home, "work.jsonl")
	os.WriteFile(jobs, []byte(b.String()), 0o644)
	c.must("mqsub", "-f", jobs)

	mostQueued := 0
	eventually(t, 30*time.Second, "the SGE site throttled with one queued probe", func() bool {
		s := c.sites()["slowq"]
		mostQueued = max(mostQueued, s.Queued)
		return s.State == "throttled" && s.Queued == 1
	})
	if mostQueued < 2 {
		t.Errorf("the SGE site had at most %d placeholders queued; want its max (3) before throttling", mostQueued)
	}
	// The cancelled ones leave SGE's queue; the probe stays.
	eventually(t, 20*time.Second, "one SGE placeholder left", func() bool { return batchJobsNamed(t, "mq-slowq-") == 1 })
	if s := c.sites()["fastq"]; s.Queued+s.Running != 2 || s.State != "ok" {
		t.Errorf("Slurm site %s with %d queued, %d running: want ok with its max 2 placeholders while SGE is throttled", s.State, s.Queued, s.Running)
	}
	for _, j := range c.jobs("DE") {
		if j.Site == "slowq" {
			t.Errorf("job %d ran at the throttled site", j.ID)
		}
	}

	// The queue moves again: the probe starts, the site recovers and works.
	asUser(t, "qrls $(qstat -u mquser | awk '/ mq-slowq/ {print $1}')")
	eventually(t, 30*time.Second, "the SGE site recovered, its probe running", func() bool {
		s := c.sites()["slowq"]
		return s.State == "ok" && s.Running >= 1
	})
	eventually(t, 90*time.Second, "all jobs done", func() bool { return len(c.jobs("D")) == n })
	bySite := map[string]int{}
	for _, j := range c.jobs("D") {
		bySite[j.Site]++
	}
	t.Logf("jobs per site: %v", bySite)
	if bySite["fastq"] == 0 || bySite["slowq"] == 0 {
		t.Errorf("jobs per site %v: want most on Slurm and some on the recovered SGE site", bySite)
	}
}
