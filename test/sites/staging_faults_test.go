//go:build e2e

package sites

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Live faults of data staging through real sshd/SFTP login hosts: the
// connection to the login host cut in the middle of a transfer, the CLS
// SIGKILLed in the middle of one, and a site's login host down. Each ends
// consistent: no partial file under a final name or recorded as a
// replica, the job run once, on inputs whose checksum is right.

// proxy is a TCP relay in front of a login host's sshd that can cut the
// connection after a number of bytes from the CLS, and slow that
// direction down.
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu    sync.Mutex
	cutAt int64 // >0: cut the connection carrying the byte past this many more
	rate  int64 // >0: bytes per second from the CLS, at most
	conns []net.Conn
	cuts  atomic.Int32
	up    atomic.Int64 // bytes from the CLS, all connections
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// cutAfter arms a cut: the connection that carries n more bytes from the
// CLS is closed (both ways); one cut per arming.
func (p *proxy) cutAfter(n int64) {
	p.mu.Lock()
	p.cutAt = p.up.Load() + n
	p.mu.Unlock()
}

func (p *proxy) limit(bytesPerSecond int64) {
	p.mu.Lock()
	p.rate = bytesPerSecond
	p.mu.Unlock()
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { io.Copy(c, s); c.Close(); s.Close() }()
		go p.upstream(c, s)
	}
}

// upstream copies the CLS's bytes to sshd, counting, pacing and cutting.
func (p *proxy) upstream(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	buf := make([]byte, 16<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			total := p.up.Add(int64(n))
			p.mu.Lock()
			cut := p.cutAt > 0 && total > p.cutAt
			if cut {
				p.cutAt = 0
			}
			rate := p.rate
			p.mu.Unlock()
			if cut {
				p.cuts.Add(1)
				return
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
			if rate > 0 {
				time.Sleep(time.Duration(int64(n) * int64(time.Second) / rate))
			}
		}
		if err != nil {
			return
		}
	}
}

// via is l reached through the proxy at addr (a known_hosts of its own).
func (l *login) via(t *testing.T, addr string) *login {
	t.Helper()
	c := *l
	c.addr, c.cmd = addr, nil
	c.knownHosts = filepath.Join(t.TempDir(), "known_hosts")
	c.writeKnownHosts(filepath.Join(l.dir, "host_key.pub"))
	return &c
}

// leftovers lists the temporary files of transfers under dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".mq-part") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// tempSize is how much a temporary of a transfer (leftovers) holds: the
// file, or the files in the private directory it is written in.
func tempSize(p string) int64 {
	var n int64
	filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// faultSetup is a CLS with the Slurm site slurmy (account mquser2, data
// root only it enters) whose placeholder is up: its login host's sshd
// is reached through a proxy. The CLS's SSH endpoint has a fixed port,
// so placeholders find it again after a restart.
type faultSetup struct {
	c     *cls
	login *login // slurmy's own sshd
	px    *proxy
	root  string // slurmy's data root
}

func newFaultSetup(t *testing.T) *faultSetup {
	t.Helper()
	need(t, "slurm")
	sshd := newLogin(t, "127.0.0.1")
	l := sshd.as(t, secondUser)
	px := newProxy(t, l.addr)
	root := privateRoot(t, secondUser, ".mq-data-faults")
	c := startCLSWith(t, nil, []string{"--ssh", freePort(t, "127.0.0.1")})
	t.Cleanup(func() { os.RemoveAll(root + c.work) })
	c.addSite("slurmy", "slurm", l.via(t, px.addr()), "--max", "1", "--walltime", "20m", "--idle", "2m", "--data-root", ".mq-data-faults")
	c.must("mqsub", "warm", "true")
	eventually(t, 3*time.Minute, "the warm-up job done at slurmy", func() bool {
		for _, j := range c.jobs("") {
			if j.Target == "warm" {
				return j.State == "D"
			}
		}
		return false
	})
	return &faultSetup{c: c, login: sshd, px: px, root: root}
}

// bigInput writes an input of n bytes on the CLS host and returns the
// bytes `cksum NAME` prints of it (what the job's output will hold).
func (f *faultSetup) bigInput(t *testing.T, name string, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i>>12)
	}
	full := filepath.Join(f.c.work, name)
	os.MkdirAll(filepath.Dir(full), 0o755)
	if err := os.WriteFile(full, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cksum", name)
	cmd.Dir = f.c.work
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkRanOnce waits for target to end and checks it ran once, done, on
// an input whose copy at slurmy is whole, recorded there with the right
// checksum, with no temporary file left.
func (f *faultSetup) checkRanOnce(t *testing.T, target, in string, wantOut []byte) protocol.JobDetail {
	t.Helper()
	var j protocol.JobInfo
	eventually(t, 4*time.Minute, target+" ended", func() bool {
		for _, x := range f.c.jobs("") {
			if x.Target == target {
				j = x
			}
		}
		return j.State == "D" || j.State == "F"
	})
	var d protocol.JobDetail
	if err := json.Unmarshal([]byte(f.c.must("mqstat", "-j", strconv.FormatInt(j.ID, 10), "--json")), &d); err != nil {
		t.Fatal(err)
	}
	if j.State != "D" || j.Attempts != 1 || j.Site != "slurmy" {
		t.Fatalf("%s: state %s after %d attempts at %q (%s); want done once at slurmy; transfers %+v", target, j.State, j.Attempts, j.Site, j.Reason, d.Transfers)
	}
	full := filepath.Join(f.c.work, in)
	local, _ := os.ReadFile(full)
	there, err := os.ReadFile(f.root + full)
	if err != nil || sum(there) != sum(local) {
		t.Errorf("the input at slurmy: %d bytes, %v; want the %d bytes of the CLS host's", len(there), err, len(local))
	}
	if len(d.Inputs) != 1 || d.Inputs[0].SHA256 != sum(local) {
		t.Errorf("inputs %+v; want SHA-256 %s", d.Inputs, sum(local))
	}
	var atSlurmy int
	for _, r := range d.Inputs[0].Replicas {
		if r.Site == "slurmy" {
			atSlurmy++
		}
	}
	if atSlurmy != 1 {
		t.Errorf("replicas %+v; want one at slurmy", d.Inputs[0].Replicas)
	}
	if len(d.Outputs) != 1 || d.Outputs[0].SHA256 != sum(wantOut) {
		t.Errorf("outputs %+v; want SHA-256 %s of %q", d.Outputs, sum(wantOut), wantOut)
	}
	if l := leftovers(t, f.root); len(l) > 0 {
		t.Errorf("temporary files left at slurmy: %v", l)
	}
	return d
}

// TestStagingConnectionCut: the connection to the login host is cut in
// the middle of a transfer; the transfer fails, is retried over a new
// connection, and the job runs once on the whole input.
func TestStagingConnectionCut(t *testing.T) {
	f := newFaultSetup(t)
	const size = 48 << 20
	out := f.bigInput(t, "in/big", size)
	f.px.cutAfter(4 << 20)
	f.c.must("mqsub", "--in", "in/big", "--out", "out/sum", "cut", "mkdir -p out && cksum in/big > out/sum")
	d := f.checkRanOnce(t, "cut", "in/big", out)
	if n := f.px.cuts.Load(); n != 1 {
		t.Fatalf("the proxy cut %d connections; want 1", n)
	}
	var failed, whole int
	for _, tr := range d.Transfers {
		switch {
		case tr.Error != "":
			failed++
		case tr.Bytes == size:
			whole++
		}
	}
	if failed < 1 || whole != 1 {
		t.Errorf("transfers %+v; want the cut one failed and one whole", d.Transfers)
	}
}

// TestStagingCLSKilledMidTransfer: the CLS is SIGKILLed while it moves a
// job's input (slowed down by the proxy) and leaves a partial temporary
// file at the site; restarted, it sweeps its leftovers from the site's
// data root (that one, and one of a file never moved there again) before
// its first transfer there, moves the input again, records one replica,
// and the job runs once.
func TestStagingCLSKilledMidTransfer(t *testing.T) {
	f := newFaultSetup(t)
	const size = 24 << 20
	out := f.bigInput(t, "in/big", size)
	f.px.limit(4 << 20) // about 6 s for the input
	f.c.must("mqsub", "--in", "in/big", "--out", "out/sum", "killed", "mkdir -p out && cksum in/big > out/sum")
	eventually(t, 2*time.Minute, "a partial temporary file at slurmy", func() bool {
		for _, p := range leftovers(t, f.root) {
			if n := tempSize(p); n > 1<<20 && n < size {
				return true
			}
		}
		return false
	})
	f.c.kill()
	left := leftovers(t, f.root)
	if len(left) != 1 {
		t.Fatalf("after the kill, temporary files %v; want the partial one", left)
	}
	if _, err := os.Stat(f.root + filepath.Join(f.c.work, "in/big")); err == nil {
		t.Fatal("the input is under its final name at slurmy though its transfer was killed")
	}
	// What a killed run left of a file no job will move there again: the
	// restarted CLS sweeps it before its first transfer there.
	never := filepath.Join(filepath.Dir(left[0]), ".never"+strings.TrimPrefix(filepath.Base(left[0]), ".big"))
	if err := os.WriteFile(never, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.px.limit(0)
	f.c.restart()
	d := f.checkRanOnce(t, "killed", "in/big", out)
	if len(d.Transfers) != 1 || d.Transfers[0].Bytes != size || d.Transfers[0].Error != "" {
		t.Errorf("transfers %+v; want the one made after the restart (the killed one was never recorded)", d.Transfers)
	}
}

// TestStagingSiteDown: a site's login host is down: the transfers of a
// job's input there fail with a clear error, the job is neither failed
// nor lost but waits, and it runs at another site that can be reached.
func TestStagingSiteDown(t *testing.T) {
	need(t, "sge")
	// grid's login host starts before the CLS, so it is still up when the
	// CLS's cleanup cancels grid's placeholder (cleanups run last first;
	// started later, it was gone and the placeholder held an SGE slot
	// until its walltime).
	grid := newLogin(t, "127.0.0.1")
	f := newFaultSetup(t)
	out := f.bigInput(t, "in/small", 64<<10)
	f.login.stop()
	t.Cleanup(func() {
		// Back up, so the CLS can cancel slurmy's placeholder at the end.
		if f.login.cmd == nil {
			f.login.start()
		}
	})
	f.c.must("mqsub", "--est", "5", "--in", "in/small", "--out", "out/sum", "down", "mkdir -p out && cksum in/small > out/sum")
	var j protocol.JobInfo
	var d protocol.JobDetail
	eventually(t, 2*time.Minute, "two failed transfers to slurmy", func() bool {
		for _, x := range f.c.jobs("") {
			if x.Target == "down" {
				j = x
			}
		}
		if j.State != "Q" {
			t.Fatalf("the job is %s (%s) while slurmy is down; want it queued", j.State, j.Reason)
		}
		json.Unmarshal([]byte(f.c.must("mqstat", "-j", strconv.FormatInt(j.ID, 10), "--json")), &d)
		failed := 0
		for _, tr := range d.Transfers {
			if tr.Error != "" && tr.To == "slurmy" {
				failed++
			}
		}
		return failed >= 2
	})
	for _, tr := range d.Transfers {
		if !strings.Contains(tr.Error, "site slurmy cannot be reached") {
			t.Errorf("transfer %+v: the error does not say the site cannot be reached", tr)
		}
	}
	// Another site comes: the job runs there.
	f.c.addSite("grid", "sge", grid, "--max", "1", "--walltime", "5m", "--idle", "3s", "--data-root", ".mq-data-faults-grid")
	eventually(t, 4*time.Minute, "the job done at grid", func() bool {
		for _, x := range f.c.jobs("") {
			if x.Target == "down" {
				j = x
			}
		}
		if j.State == "F" {
			t.Fatalf("the job failed: %s", j.Reason)
		}
		return j.State == "D"
	})
	if j.Site != "grid" || j.Attempts != 1 {
		t.Errorf("the job ran at %q after %d attempts; want grid, once", j.Site, j.Attempts)
	}
	json.Unmarshal([]byte(f.c.must("mqstat", "-j", strconv.FormatInt(j.ID, 10), "--json")), &d)
	if len(d.Outputs) != 1 || d.Outputs[0].SHA256 != sum(out) {
		t.Errorf("outputs %+v; want SHA-256 %s", d.Outputs, sum(out))
	}
}

// TestStagingSiteRemoved: a site is removed (cls site remove) while a job's
// input is on its way there: the transfer ends failed, but the job is
// neither failed nor lost; it runs at a site added later, once.
func TestStagingSiteRemoved(t *testing.T) {
	need(t, "sge")
	grid := newLogin(t, "127.0.0.1") // before the CLS: see TestStagingSiteDown
	f := newFaultSetup(t)
	const size = 24 << 20
	out := f.bigInput(t, "in/big", size)
	f.px.limit(2 << 20) // about 12 s for the input
	f.c.must("mqsub", "--in", "in/big", "--out", "out/sum", "removed", "mkdir -p out && cksum in/big > out/sum")
	eventually(t, 2*time.Minute, "a partial temporary file at slurmy", func() bool {
		for _, p := range leftovers(t, f.root) {
			if n := tempSize(p); n > 1<<20 && n < size {
				return true
			}
		}
		return false
	})
	f.c.must("cls", "site", "remove", "slurmy")
	f.px.limit(0)
	job := func() (protocol.JobInfo, protocol.JobDetail) {
		var j protocol.JobInfo
		for _, x := range f.c.jobs("") {
			if x.Target == "removed" {
				j = x
			}
		}
		var d protocol.JobDetail
		json.Unmarshal([]byte(f.c.must("mqstat", "-j", strconv.FormatInt(j.ID, 10), "--json")), &d)
		return j, d
	}
	// The transfer there ends: cut off with the site's connection (the
	// place is then left alone, as a site down is: no other transfer is
	// tried there), or, removed between two, refused for want of the site.
	eventually(t, 2*time.Minute, "the transfer to slurmy ended by the site's removal", func() bool {
		_, d := job()
		for _, tr := range d.Transfers {
			if tr.To == "slurmy" && (strings.Contains(tr.Error, "no site slurmy") || strings.Contains(tr.Error, "connection lost")) {
				return true
			}
		}
		return false
	})
	if j, d := job(); j.State != "Q" {
		t.Fatalf("the job is %s (%s) after its site was removed; want it queued; transfers %+v", j.State, j.Reason, d.Transfers)
	}
	f.c.addSite("grid", "sge", grid, "--max", "1", "--walltime", "5m", "--idle", "3s", "--data-root", ".mq-data-faults-grid")
	var j protocol.JobInfo
	var d protocol.JobDetail
	eventually(t, 4*time.Minute, "the job done at grid", func() bool {
		j, d = job()
		if j.State == "F" {
			t.Fatalf("the job failed: %s; transfers %+v", j.Reason, d.Transfers)
		}
		return j.State == "D"
	})
	if j.Site != "grid" || j.Attempts != 1 {
		t.Errorf("the job ran at %q after %d attempts; want grid, once", j.Site, j.Attempts)
	}
	if len(d.Outputs) != 1 || d.Outputs[0].SHA256 != sum(out) {
		t.Errorf("outputs %+v; want SHA-256 %s", d.Outputs, sum(out))
	}
}
