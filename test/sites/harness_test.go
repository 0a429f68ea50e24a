//go:build e2e

// Package sites tests sites end to end against real batch systems: Son of
// Grid Engine and Slurm on this host (scripts/sge.sh, scripts/slurm.sh), an
// OpenSSH server on loopback as the login host, the unprivileged user
// mquser (scripts/setup.sh) to submit as, and the real cls, mqsub, mqstat
// and mqagent binaries. OpenPBS, where it is vendored beside the repository
// (scripts/pbs.sh), runs in the network namespace pbsns (host pbshost,
// 10.211.0.1; this host is 10.211.0.2 there): its login host is an sshd
// inside the namespace, its user mqpbs, and a CLS with a PBS site listens
// on 10.211.0.2 for placeholders to reach it. Needs root; each test skips,
// saying why, where its parts are missing. Run with
//
//	go test -tags e2e -count=1 ./test/sites/
package sites

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/filelock"
	"github.com/mq-hpc/mq/test/internal/fds"

	"github.com/mq-hpc/mq/protocol"
)

var (
	binDir    string
	repo      string
	clientKey string // private key mquser accepts
	skipAll   string // why every test skips
	haveSGE   string // "" or why SGE is unavailable
	haveSlurm string
	havePBS   string
)

// The PBS server's network namespace (scripts/pbs.sh): the login host and
// the compute node are pbsHost inside it; this host is pbsPeer there.
const (
	pbsNS   = "pbsns"
	pbsHost = "10.211.0.1"
	pbsPeer = "10.211.0.2"
)

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	fds.CloseInherited()
	var err error
	repo, err = filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	switch {
	case os.Geteuid() != 0:
		skipAll = "needs root (to run sshd, SGE and Slurm and submit as mquser)"
	case !exists("/usr/sbin/sshd"):
		skipAll = "no OpenSSH server: run scripts/setup.sh as root"
	}
	if _, err := user.Lookup("mquser"); err != nil && skipAll == "" {
		skipAll = "no user mquser: run scripts/setup.sh as root"
	}
	if skipAll != "" {
		return m.Run()
	}
	binDir, err = os.MkdirTemp("", "mqsites-bin")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(binDir)
	os.Chmod(binDir, 0o755)
	build := exec.Command("go", "build", "-o", binDir+"/", "./cmd/cls", "./cmd/mqsub", "./cmd/mqstat", "./cmd/mqagent")
	build.Dir = repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // static, like the agents shipped to sites
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "sites: go build: %v\n%s", err, out)
		return 1
	}
	if out, err := exec.Command(filepath.Join(repo, "scripts/sge.sh"), "start").CombinedOutput(); err != nil {
		haveSGE = "SGE did not start: " + strings.TrimSpace(string(out))
	}
	if out, err := exec.Command(filepath.Join(repo, "scripts/slurm.sh"), "start").CombinedOutput(); err != nil {
		haveSlurm = "Slurm did not start: " + strings.TrimSpace(string(out))
	}
	if out, err := exec.Command(filepath.Join(repo, "scripts/pbs.sh"), "start").CombinedOutput(); err != nil {
		havePBS = "PBS did not start: " + strings.TrimSpace(string(out))
	}
	// One run at a time (cancelLeftovers): a second waits for the first.
	lock, err := oneRunAtATime("/run/lock/mq-sites-suite.lock")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sites:", err)
		return 1
	}
	defer filelock.Close(lock) // referenced until the run ends: a file collected is closed, and its lock with it
	cancelLeftovers()
	// One key for every test's login host: mquser accepts it.
	clientKey = filepath.Join(binDir, "client_key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", clientKey).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "sites: ssh-keygen: %v %s\n", err, out)
		return 1
	}
	pub, _ := os.ReadFile(clientKey + ".pub")
	users := []string{"mquser"}
	if _, err := user.Lookup(secondUser); err == nil {
		users = append(users, secondUser)
	}
	if havePBS == "" {
		users = append(users, "mqpbs")
	}
	for _, u := range users {
		ak := "/home/" + u + "/.ssh/authorized_keys"
		os.MkdirAll(filepath.Dir(ak), 0o700)
		if err := editAuthorizedKeys(ak, func(lines []string) []string { return append(lines, strings.TrimSpace(string(pub))) }); err != nil {
			fmt.Fprintln(os.Stderr, "sites:", err)
			return 1
		}
		exec.Command("chown", "-R", u+":"+u, filepath.Dir(ak)).Run()
		// Only our key goes: a CLS may have added its own lines since, and
		// restoring the file as it was took such lines away mid-run.
		defer editAuthorizedKeys(ak, func(lines []string) []string {
			return slices.DeleteFunc(lines, func(l string) bool { return l == strings.TrimSpace(string(pub)) })
		})
	}
	return m.Run()
}

// oneRunAtATime takes an exclusive lock on path, held until the file it
// returns is closed or the process ends, waiting for another run of the
// suite that holds it.
func oneRunAtATime(path string) (*os.File, error) {
	os.MkdirAll(filepath.Dir(path), 0o755)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		fmt.Fprintf(os.Stderr, "sites: waiting for another run of this suite (it holds %s)\n", path)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// cancelLeftovers cancels the site users' batch jobs named like
// placeholders. Only this suite submits as them, one run at a time (each
// batch system has two slots: two runs would keep each other's
// placeholders waiting), so these are a run's that died. Left, they held
// the slots: the first test's placeholders waited behind them past its
// deadline (a slurmctld restarted had recovered two that a CLS had
// cancelled just before it stopped).
func cancelLeftovers() {
	run := func(user, cmd string) { exec.Command("su", "-", user, "-c", cmd).Run() }
	for _, u := range []string{"mquser", secondUser} {
		if haveSGE == "" {
			run(u, `ids=$(qstat -u `+u+` | awk 'NR > 2 && $3 ~ /^mq-/ {print $1}') && [ -n "$ids" ] && qdel $ids`)
		}
		if haveSlurm == "" {
			run(u, `ids=$(squeue -h -u `+u+` -o '%i %j' | awk '$2 ~ /^mq-/ {print $1}') && [ -n "$ids" ] && scancel $ids`)
		}
	}
	if havePBS == "" {
		exec.Command("ip", "netns", "exec", pbsNS, "su", "-", "mqpbs", "-c",
			`ids=$(qstat -f | awk '/^Job Id:/ {id = $3} /^ +Job_Name = mq-/ {print id}') && [ -n "$ids" ] && qdel $ids`).Run()
	}
}

// editAuthorizedKeys rewrites an authorized_keys file as edit says, under
// the lock the CLS takes for its own lines there (.mq-lock beside it), so
// that the suite and the CLSs keep each other's lines.
func editAuthorizedKeys(path string, edit func([]string) []string) error {
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(path), ".mq-lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer filelock.Close(lock)
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	lines = edit(lines)
	out := strings.Join(lines, "\n")
	if len(lines) > 0 {
		out += "\n"
	}
	fi, statErr := os.Stat(filepath.Dir(path))
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); statErr == nil && ok {
		os.Chown(path, int(st.Uid), int(st.Gid))
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func need(t *testing.T, systems ...string) {
	t.Helper()
	if skipAll != "" {
		t.Skip(skipAll)
	}
	for _, s := range systems {
		if s == "sge" && haveSGE != "" {
			t.Skip(haveSGE)
		}
		if s == "slurm" && haveSlurm != "" {
			t.Skip(haveSlurm)
		}
		if s == "pbs" && havePBS != "" {
			t.Skip(havePBS)
		}
	}
}

// login is an sshd acting as a cluster's login host.
type login struct {
	t          *testing.T
	dir        string
	addr       string // host:port
	knownHosts string
	cmd        *exec.Cmd
	ns         string // network namespace sshd runs in, if any
	user       string // the site's user there
	stock      string // Debian's sshd_config, if sshd runs with it
	extra      string // sshd_config lines added to the test's own
	// pam, if set, is the PAM service sshd asks, after the key, for a
	// keyboard-interactive answer at each login from 127.0.0.2 (from
	// outside; compute nodes' logins, from 127.0.0.1, need the key
	// only): sshd runs under that name, which is the service it names to
	// PAM.
	pam string
}

func freePort(t *testing.T, host string) string {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newLogin starts sshd on addr (host:port; port "" = a free one).
func newLogin(t *testing.T, host string) *login {
	t.Helper()
	return newLoginIn(t, "", freePort(t, host), "mquser")
}

// newPBSLogin starts the PBS cluster's login host: an sshd inside the PBS
// network namespace, where the site's user is mqpbs.
func newPBSLogin(t *testing.T) *login {
	t.Helper()
	// A port free here is as good as any there: only PBS listens there.
	_, port, _ := net.SplitHostPort(freePort(t, "127.0.0.1"))
	return newLoginIn(t, pbsNS, net.JoinHostPort(pbsHost, port), "mqpbs")
}

// pbsLoginIfHere is newPBSLogin where PBS is here, nil where not. Like
// every login host, start it before the CLS: cleanups run last first, and
// the CLS's (which cancels the sites' placeholders) needs the login host
// still up. (Started after, it was gone, and held PBS placeholders were
// left in the queue.)
func pbsLoginIfHere(t *testing.T) *login {
	t.Helper()
	if havePBS != "" {
		return nil
	}
	return newPBSLogin(t)
}

// secondUser is a second site's account (scripts/setup.sh): its home is
// private, so a site as it and a site as mquser are two administrative
// domains that share no files.
const secondUser = "mquser2"

// as is the same login host, logged in to as account name: cleanups stay
// with l.
func (l *login) as(t *testing.T, name string) *login {
	t.Helper()
	if _, err := user.Lookup(name); err != nil {
		t.Skipf("no user %s: run scripts/setup.sh as root", name)
	}
	c := *l
	c.user, c.cmd = name, nil
	return &c
}

// privateRoot makes a data root (relative to account name's home) that
// only that account may enter, and returns its absolute path.
func privateRoot(t *testing.T, name, root string) string {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Skipf("no user %s: run scripts/setup.sh as root", name)
	}
	dir := filepath.Join(u.HomeDir, root)
	if out, err := exec.Command("su", name, "-c", "mkdir -p -m 700 "+dir+" && chmod 700 "+dir).CombinedOutput(); err != nil {
		t.Fatalf("making %s as %s: %v %s", dir, name, err, out)
	}
	return dir
}

// canRead says whether account name can list dir.
func canRead(name, dir string) bool {
	return exec.Command("su", name, "-c", "ls "+dir).Run() == nil
}

// loginFor starts a login host for a batch system's site.
func loginFor(t *testing.T, typ string) *login {
	t.Helper()
	if typ == "pbs" {
		return newPBSLogin(t)
	}
	return newLogin(t, "127.0.0.1")
}

func newLoginIn(t *testing.T, ns, addr, user string) *login {
	t.Helper()
	return startLogin(&login{t: t, dir: t.TempDir(), addr: addr, ns: ns, user: user})
}

// startLogin gives l a host key and starts its sshd until the test ends.
func startLogin(l *login) *login {
	t := l.t
	t.Helper()
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(l.dir, "host_key")).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	l.knownHosts = filepath.Join(l.dir, "known_hosts")
	l.writeKnownHosts(filepath.Join(l.dir, "host_key.pub"))
	l.start()
	t.Cleanup(l.stop)
	return l
}

// newStockLoginIn starts a login host's sshd (site user mquser) in the
// network namespace ns, as Debian configures it (/etc/ssh/sshd_config as installed: GatewayPorts
// no, PAM) but for its port, listen address, host key and pid file. addr
// (host:port) is where it listens and how this host reaches it.
func newStockLoginIn(t *testing.T, ns, addr string) *login {
	t.Helper()
	stock, err := os.ReadFile("/etc/ssh/sshd_config")
	if err != nil {
		t.Skipf("no stock sshd_config: %v", err)
	}
	return startLogin(&login{t: t, dir: t.TempDir(), addr: addr, ns: ns, user: "mquser", stock: string(stock)})
}

func (l *login) writeKnownHosts(pubFile string) {
	pub, err := os.ReadFile(pubFile)
	if err != nil {
		l.t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(l.addr)
	f := strings.Fields(string(pub))
	os.WriteFile(l.knownHosts, []byte(fmt.Sprintf("[%s]:%s %s %s\n", host, port, f[0], f[1])), 0o644)
}

func (l *login) start() {
	l.t.Helper()
	os.MkdirAll("/run/sshd", 0o755)
	host, port, _ := net.SplitHostPort(l.addr)
	conf := filepath.Join(l.dir, "sshd_config")
	if l.stock != "" {
		// The first value of a keyword wins: ours, then Debian's file.
		os.WriteFile(conf, []byte(fmt.Sprintf("Port %s\nListenAddress %s\nHostKey %s/host_key\nPidFile %s/sshd.pid\n%s", port, host, l.dir, l.dir, l.stock)), 0o600)
	} else {
		os.WriteFile(conf, []byte(fmt.Sprintf(`Port %s
ListenAddress %s
HostKey %s/host_key
PidFile %s/sshd.pid
AuthorizedKeysFile .ssh/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
%sPermitRootLogin no
MaxStartups 100:30:200
MaxSessions 100
AllowTcpForwarding yes
GatewayPorts clientspecified
Subsystem sftp internal-sftp
%s%s`, port, host, l.dir, l.dir, l.auth(), l.extra, l.outside())), 0o600)
	}
	// -D: stay in the foreground, so the test owns the process.
	sshd := "/usr/sbin/sshd"
	if l.pam != "" {
		// sshd names itself to PAM (and re-executes itself) by argv[0].
		sshd = filepath.Join(l.dir, l.pam)
		if err := os.Symlink("/usr/sbin/sshd", sshd); err != nil && !os.IsExist(err) {
			l.t.Fatal(err)
		}
	}
	l.cmd = exec.Command(sshd, "-D", "-f", conf, "-E", filepath.Join(l.dir, "sshd.log"))
	if l.ns != "" { // ip execs sshd: the process is still sshd's
		l.cmd = exec.Command("ip", append([]string{"netns", "exec", l.ns}, l.cmd.Args...)...)
	}
	pidFile := filepath.Join(l.dir, "sshd.pid")
	os.Remove(pidFile) // an earlier sshd's, restarted
	if err := l.cmd.Start(); err != nil {
		l.t.Fatalf("sshd: %v", err)
	}
	// sshd writes its pid file once it listens. A port that answers would
	// not do: another process may have taken it since freePort.
	want := strconv.Itoa(l.cmd.Process.Pid)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(b)) == want {
			return
		}
	}
	b, _ := os.ReadFile(filepath.Join(l.dir, "sshd.log"))
	l.t.Fatalf("sshd did not listen on %s: %s", l.addr, b)
}

// auth is the test's own sshd_config's lines for how users log in: a
// key, and where l.pam is set an answer PAM asks for.
func (l *login) auth() string {
	if l.pam == "" {
		return "KbdInteractiveAuthentication no\nUsePAM no\n"
	}
	return "KbdInteractiveAuthentication yes\nUsePAM yes\n"
}

// outside is the Match block, last in the config, that asks logins from
// outside for the answer too.
func (l *login) outside() string {
	if l.pam == "" {
		return ""
	}
	return "Match Address 127.0.0.2\n  AuthenticationMethods publickey,keyboard-interactive\n"
}

// stop takes the login host down: the listener and every connection
// (sshd serves each in a child process, which outlives the listener).
func (l *login) stop() {
	if l.cmd == nil {
		return
	}
	// Every descendant: a connection's privileged sshd forks the user's
	// session process, which holds the socket too; killing only the
	// children left a connection made before stop working after it.
	var kill func(int)
	kill = func(pid int) {
		for _, child := range children(pid) {
			kill(child)
			syscall.Kill(child, syscall.SIGKILL)
		}
	}
	kill(l.cmd.Process.Pid)
	l.cmd.Process.Signal(syscall.SIGTERM)
	l.cmd.Wait()
	l.cmd = nil
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		var state string
		var ppid, self int
		fmt.Sscanf(string(b[i+1:]), " %s %d", &state, &ppid)
		fmt.Sscanf(string(b), "%d", &self)
		if ppid == pid {
			out = append(out, self)
		}
	}
	return out
}

// cls is a running `cls serve` in its own MQ_HOME.
type cls struct {
	t      *testing.T
	home   string
	work   string // where commands run: jobs run there as mquser, so anyone may enter it
	cmd    *exec.Cmd
	args   []string // how it was started, to restart it
	stderr *bytes.Buffer
}

var sshRE = regexp.MustCompile(`cls: SSH on (\S+), host key (\S+)`)

// startCLS starts a CLS with no local placeholders, an SSH endpoint, short
// leases and a fast site poll. prefix runs it (e.g. in a network namespace).
func startCLS(t *testing.T, prefix ...string) *cls {
	t.Helper()
	return startCLSWith(t, prefix, nil)
}

// startCLSWith is startCLS with more cls serve flags.
func startCLSWith(t *testing.T, prefix, flags []string) *cls {
	t.Helper()
	c := &cls{t: t, home: t.TempDir(), stderr: &bytes.Buffer{}}
	work, err := os.MkdirTemp("", "mqsites-work")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(work, 0o777)
	t.Cleanup(func() { os.RemoveAll(work) })
	c.work = work
	args := append(prefix, filepath.Join(binDir, "cls"), "serve", "--local", "0",
		"--lease", "3s", "--site-poll", "300ms", "--agents", binDir)
	if !slices.Contains(flags, "--ssh") {
		args = append(args, "--ssh", "127.0.0.1:0")
	}
	args = append(args, flags...)
	c.args = args
	c.serve()
	t.Cleanup(c.stop)
	return c
}

// serve starts c's cls serve and waits until it serves.
func (c *cls) serve() {
	c.t.Helper()
	c.cmd = exec.Command(c.args[0], c.args[1:]...)
	c.cmd.Env = append(os.Environ(), "MQ_HOME="+c.home)
	pr, pw, _ := os.Pipe()
	c.cmd.Stderr = pw
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	pw.Close()
	lines := make(chan string, 10)
	go func() {
		buf := make([]byte, 4096)
		var acc string
		for {
			n, err := pr.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.IndexByte(acc, '\n')
				if i < 0 {
					break
				}
				select {
				case lines <- acc[:i]:
				default:
				}
				acc = acc[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	deadline := time.After(60 * time.Second) // a busy machine
	for ready := false; !ready; {
		select {
		case l := <-lines:
			c.stderr.WriteString(l + "\n")
			ready = strings.Contains(l, "cls: serving")
		case <-deadline:
			c.t.Fatalf("cls did not start: %s", c.stderr)
		}
	}
}

// kill SIGKILLs the CLS and waits for it to be gone.
func (c *cls) kill() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// restart starts the CLS again in its home, with the same flags.
func (c *cls) restart() {
	c.t.Helper()
	c.stderr.Reset()
	c.serve()
}

// reachableFromPBS is the cls serve flag that puts the CLS's SSH endpoint
// where the PBS compute node (inside its namespace) reaches it, as the SGE
// and Slurm ones on this host do; none without PBS.
func reachableFromPBS() []string {
	if havePBS != "" {
		return nil
	}
	return []string{"--ssh", pbsPeer + ":0"}
}

// stop removes every site (cancelling its placeholders), then the CLS.
func (c *cls) stop() {
	var sl protocol.SiteList
	if out, err := c.run("cls", "site", "list", "--json"); err == nil && json.Unmarshal([]byte(out), &sl) == nil {
		for _, s := range sl.Sites {
			c.run("cls", "site", "remove", s.Name)
		}
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
	if c.t.Failed() {
		log, _ := os.ReadFile(filepath.Join(c.home, "cls.log"))
		c.t.Logf("cls.log:\n%s", tail(string(log), 60))
	}
}

func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func (c *cls) run(name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Env = append(os.Environ(), "MQ_HOME="+c.home)
	cmd.Dir = c.work
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func (c *cls) must(name string, args ...string) string {
	c.t.Helper()
	out, err := c.run(name, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

func (c *cls) addSite(name, typ string, l *login, extra ...string) {
	c.t.Helper()
	args := append([]string{"site", "add", name, "--type", typ, "--ssh", l.user + "@" + l.addr,
		"--key", clientKey, "--known-hosts", l.knownHosts}, extra...)
	c.must("cls", args...)
}

// sites is what `cls site list --json` lists, asked in this process (ask).
func (c *cls) sites() map[string]protocol.SiteInfo {
	c.t.Helper()
	var sl protocol.SiteList
	c.ask(func(ctx context.Context, cl *client.Client) (err error) {
		sl, err = client.Do(ctx, cl, protocol.OpSiteList, protocol.Empty{})
		return err
	})
	m := map[string]protocol.SiteInfo{}
	for _, s := range sl.Sites {
		m[s.Name] = s
	}
	return m
}

// jobs is what `mqstat --json [-s states]` lists (every job but the
// deleted without states), asked in this process (ask).
func (c *cls) jobs(states string) []protocol.JobInfo {
	c.t.Helper()
	var js []protocol.JobInfo
	c.ask(func(ctx context.Context, cl *client.Client) error {
		js = nil
		return client.Stream(ctx, cl, protocol.OpStat, protocol.Stat{States: states}, func(r protocol.StatReply) error {
			js = append(js, r.Jobs...)
			return nil
		})
	})
	return js
}

// ask runs call on a connection to c's CLS from this process, as mqstat
// and cls site list would, and fails the test if it fails. The harness's
// polls ask several times a second for most of the suite: an mqstat or
// cls process each time cost 50-80 ms of CPU, a tenth of the machine,
// which the suites beside this one in CI wait for. What the commands
// print is tested where a test runs them. A CLS restarting is waited
// for, as the commands wait for it.
func (c *cls) ask(call func(context.Context, *client.Client) error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		cl, err := client.Dial(ctx, c.home, protocol.RoleUser, "sites-test")
		if err == nil {
			err = call(ctx, cl)
			cl.Close()
			if err == nil {
				return
			}
		}
		var refused *protocol.Error
		if errors.As(err, &refused) || ctx.Err() != nil {
			c.t.Fatalf("asking the CLS: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // not up yet, or gone meanwhile
	}
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	eventuallyShowing(t, timeout, what, cond, nil)
}

// eventuallyShowing is eventually that, timed out, also prints what show
// says then (the batch queues, say).
func eventuallyShowing(t *testing.T, timeout time.Duration, what string, cond func() bool, show func(*testing.T) string) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			if show != nil {
				t.Fatalf("timed out after %s waiting for %s; then:\n%s", timeout, what, show(t))
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}

// asUser runs a shell command as mquser (the batch systems' view).
func asUser(t *testing.T, cmd string) string { return asUserOf(t, "sge", cmd) }

// asUserOf runs a shell command as a batch system's site user: mqpbs in
// the PBS namespace, with its login profile (PBS's commands first), for
// PBS; mquser here for SGE and Slurm.
func asUserOf(t *testing.T, typ, cmd string) string {
	t.Helper()
	// A login shell, as the CLS's commands have: the batch system's
	// environment is the site's (/etc/profile.d), not this process's,
	// whose PATH may name SGE's own binaries without its SGE_ROOT.
	c := exec.Command("su", "-", "mquser", "-c", cmd)
	if typ == "pbs" {
		c = exec.Command("ip", "netns", "exec", pbsNS, "su", "-", "mqpbs", "-c", cmd)
	}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Logf("%s: %v", cmd, err)
	}
	return string(out)
}

// batchIDs lists the ids of the site user's jobs in a batch system whose
// name starts with prefix (SGE's qstat shows the first 10 characters of a
// name).
func batchIDs(t *testing.T, typ, prefix string) []string {
	t.Helper()
	var list string
	switch typ {
	case "sge":
		list = "qstat -u mquser | awk 'NR > 2 {print $1, $3}'"
		prefix = prefix[:min(len(prefix), 10)]
	case "slurm":
		list = "squeue -h -u mquser -o '%i %j'"
	case "pbs":
		list = "qstat -f | awk '/^Job Id:/ {id = $3} /^ +Job_Name = / {print id, $3}'"
	}
	var ids []string
	for _, l := range strings.Split(asUserOf(t, typ, list), "\n") {
		if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[1], prefix) {
			ids = append(ids, f[0])
		}
	}
	return ids
}

// ourBatchJobs counts the site users' batch jobs named like our
// placeholders.
func ourBatchJobs(t *testing.T) int { return batchJobsNamed(t, "mq-") }

// drainEarlier waits for earlier tests' placeholders (batch jobs named
// mq-, which their CLSes cancelled on stopping) to be gone, so that a test
// counts its own. Past grace it cancels what is left itself (a cancel lost
// with a CLS killed mid-stop): no CLS owns them, as the tests here run one
// at a time. At timeout it fails with what the queues still hold.
func drainEarlier(t *testing.T, grace, timeout time.Duration) {
	t.Helper()
	start, cancelled := time.Now(), false
	for ; ourBatchJobs(t) > 0; time.Sleep(200 * time.Millisecond) {
		switch {
		case time.Since(start) > timeout:
			t.Fatalf("timed out after %s waiting for earlier tests' placeholders gone; the queues hold:\n%s", timeout, batchQueues(t))
		case !cancelled && time.Since(start) > grace:
			t.Logf("earlier tests' placeholders left after %s, cancelled:\n%s", grace, batchQueues(t))
			for typ, cancel := range map[string]string{"sge": "qdel", "slurm": "scancel", "pbs": "qdel"} {
				if ids := batchIDs(t, typ, "mq-"); len(ids) > 0 {
					asUserOf(t, typ, cancel+" "+strings.Join(ids, " ")+" || true")
				}
			}
			cancelled = true
		}
	}
}

// batchQueues is what each batch system here lists of its site user's jobs.
func batchQueues(t *testing.T) string {
	var b strings.Builder
	for _, q := range []struct{ typ, why, list string }{
		{"sge", haveSGE, "qstat -u mquser"}, {"slurm", haveSlurm, "squeue -u mquser"}, {"pbs", havePBS, "qstat"},
	} {
		if q.why == "" {
			fmt.Fprintf(&b, "%s:\n%s", q.typ, asUserOf(t, q.typ, q.list))
		}
	}
	return b.String()
}

// batchJobsNamed counts the site users' batch jobs whose name starts with
// prefix, in every batch system here: a test checks its own site's
// placeholders, not those an earlier test's cancel is still clearing.
func batchJobsNamed(t *testing.T, prefix string) int {
	n := 0
	for typ, why := range map[string]string{"sge": haveSGE, "slurm": haveSlurm, "pbs": havePBS} {
		if why == "" {
			n += len(batchIDs(t, typ, prefix))
		}
	}
	return n
}

var nsMu sync.Mutex

var _ = context.Background
