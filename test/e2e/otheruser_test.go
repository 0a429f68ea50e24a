//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/otheruser"
)

// asOther runs a shell script as the unprivileged user name and returns
// its combined output and error.
func asOther(name, script string) (string, error) {
	out, err := exec.Command("runuser", "-u", name, "--", "sh", "-c", script).CombinedOutput()
	return string(out), err
}

// TestStdioPlantedByOtherUser: mqagent, another user of the machine,
// plants in a shared sticky directory (as /tmp) a link to a file of the
// CLS's user and a file of its own that everyone may write, where a job
// of ours will write its -o and -e. The job must refuse both (failed,
// the reason naming the path), write nothing through the link, and give
// mqagent none of its output; the same -o to a fresh name works. Nor is
// a link written through in a directory mqagent made for itself there.
// (Linux's fs.protected_symlinks and fs.protected_regular stop this too
// where they are on; they are off in many containers.)
func TestStdioPlantedByOtherUser(t *testing.T) {
	u, _, _ := otherUser(t)
	h := newHarness(t)
	shared := otheruser.SharedDir(t, "mqe2e-shared-")
	victim := filepath.Join(h.dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link, trap := filepath.Join(shared, "link.out"), filepath.Join(shared, "trap.err")
	logs, theirs := filepath.Join(shared, "logs"), filepath.Join(shared, "theirs")
	if out, err := asOther(u.Username, fmt.Sprintf("ln -s %s %s && umask 0 && : > %s && mkdir %s && ln -s %s %s", victim, link, trap, theirs, theirs, logs)); err != nil {
		t.Fatalf("the attacker's setup failed: %v: %s", err, out)
	}
	h.startCLS("--local", "1")
	viaLink := h.submit("-o", link, "link", "echo SECRET-OUT")
	intoTrap := h.submit("-o", filepath.Join(shared, "fine.out"), "-e", trap, "trap", "echo SECRET-ERR >&2")
	viaDir := h.submit("-o", filepath.Join(logs, "x.out"), "dir", "echo SECRET-DIR")
	fresh := h.submit("-o", filepath.Join(shared, "fresh.out"), "fresh", "echo mine")
	for id, path := range map[int64]string{viaLink: link + ": a ", intoTrap: trap + ": a ", viaDir: logs + " is a link"} {
		d := h.waitState(id, "DF", time.Minute)
		if d.State != "F" || !strings.Contains(d.Reason, path) || !strings.Contains(d.Reason, "every user can write") {
			t.Errorf("job %d writing through mqagent's entry: %s %q, want F saying %q", id, d.State, d.Reason, path)
		}
	}
	if ents, _ := os.ReadDir(theirs); len(ents) != 0 {
		t.Errorf("a job wrote into mqagent's directory through its link: %v", ents)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the job wrote through mqagent's link: the victim holds %q", b)
	}
	if out, err := asOther(u.Username, "cat "+trap); err != nil || out != "" {
		t.Errorf("mqagent's file got %q (%v), want nothing of the job's", out, err)
	}
	// A directory of mqagent's own (as a /tmp/logs it made first, which
	// a script's mkdir -p takes as it is): its link there, to our file,
	// at the name or on the way, is not written through.
	own := filepath.Join(shared, "ownlogs")
	if out, err := asOther(u.Username, fmt.Sprintf("mkdir -m 755 %s && ln -s %s %s/x.out && ln -s %s %s/sub", own, victim, own, h.dir, own)); err != nil {
		t.Fatalf("the attacker's setup failed: %v: %s", err, out)
	}
	for _, path := range []string{filepath.Join(own, "x.out"), filepath.Join(own, "sub", "victim")} {
		id := h.submit("-o", path, "own", "echo SECRET-OWN")
		if d := h.waitState(id, "DF", time.Minute); d.State != "F" || !strings.Contains(d.Reason, own) {
			t.Errorf("job %d, -o %s through mqagent's own directory: %s %q, want F naming it", id, path, d.State, d.Reason)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("a job wrote through mqagent's link in its own directory: the victim holds %q", b)
	}
	if d := h.waitState(fresh, "DF", time.Minute); d.State != "D" {
		t.Fatalf("-o to a fresh name in the shared directory: %s %q", d.State, d.Reason)
	}
	fi, err := os.Lstat(filepath.Join(shared, "fresh.out"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uint32(os.Geteuid()) || !fi.Mode().IsRegular() {
		t.Errorf("fresh.out: %v owned by uid %d; want our own regular file", fi.Mode(), st.Uid)
	}
}

// TestOtherUserReadsNothing: a CLS of ours (root here) serves a home
// others may list (0755: served with a warning), a dashboard and SSH,
// runs a job whose command, environment (-v, -V) and output carry
// secrets, and its output as a user keeps it (cls serve >cls.out, the
// umask's 0644). mqagent, another user of the machine, then finds
// nothing: no file of the home is readable, the socket refuses it, the
// dashboard and /metrics answer 401, the kept output holds no token, no
// process's command line (cls, its placeholders, the job) holds the
// environment's secrets or the token, and nothing it can read in /tmp,
// /var/tmp or /dev/shm holds a secret.
func TestOtherUserReadsNothing(t *testing.T) {
	u, _, _ := otherUser(t)
	for _, p := range []string{"curl", "find", "grep"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed", p)
		}
	}
	h := newHarness(t)
	start := time.Now()
	if err := os.Chmod(h.home, 0o755); err != nil {
		t.Fatal(err)
	}
	h.startCLS("--local", "2", "--http", "127.0.0.1:0", "--ssh", "127.0.0.1:0")
	addr, token := h.dashboardAddr()
	kept := filepath.Join(h.dir, "cls.out")
	if err := os.WriteFile(kept, []byte(h.cls.stderr.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(h.dir, 0o755) // the kept output where others can read it
	const envSecret, exported, outSecret = "env-secret-5f0a", "exported-secret-91c2", "out-secret-33de"
	gate := filepath.Join(h.dir, "gate")
	h.ok("mqsub", "-v", "PASSWD="+envSecret, "job", fmt.Sprintf("echo %s; echo $PASSWD >&2; while [ ! -e %s ]; do sleep 0.05; done", outSecret, gate))
	r, err := runBin(90*time.Second, append(h.env(), "API_KEY="+exported), h.dir, nil, "mqsub", "-V", "exp", "echo $API_KEY; sleep 600")
	if err != nil {
		t.Fatalf("mqsub -V: %v: %s", err, r)
	}
	h.waitState(1, "E", time.Minute)
	h.waitState(2, "E", time.Minute)
	waitFor(t, time.Minute, func() error { // its output is on disk
		if out, _ := exec.Command("grep", "-rl", outSecret, filepath.Join(h.home, "output")).Output(); len(out) == 0 {
			return fmt.Errorf("job 1's output is not in %s/output yet", h.home)
		}
		return nil
	})

	other := func(script string) string {
		t.Helper()
		out, err := asOther(u.Username, script)
		if err != nil {
			t.Fatalf("as %s: %s: %v: %s", u.Username, script, err, out)
		}
		return out
	}
	if out := other("find " + h.home + " -readable -type f 2>/dev/null; true"); out != "" {
		t.Errorf("%s can read files of MQ_HOME:\n%s", u.Username, out)
	}
	if out := other("curl -s -m 20 -o /dev/null -w '%{http_code}' --unix-socket " + h.sock() + " http://cls/; echo \" exit=$?\""); !strings.Contains(out, "exit=7") {
		t.Errorf("%s connecting to the socket: %q, want refused (curl's exit 7)", u.Username, out)
	}
	for _, p := range []string{"/", "/jobs", "/job/1", "/events", "/metrics"} {
		if out := other("curl -s -m 20 -w '\\n%{http_code}' http://" + addr + p); !strings.HasSuffix(out, "\n401") || strings.Contains(out, outSecret) {
			t.Errorf("%s as %s: %.300s", p, u.Username, out)
		}
	}
	if out := other("cat " + kept); strings.Contains(out, token) {
		t.Errorf("cls serve's kept output, readable by %s, holds the dashboard's token: %q", u.Username, out)
	}
	sawJob := false // the job's own command, as ps shows any process's
	for _, pid := range h.ownProcs() {
		line := other(fmt.Sprintf("cat /proc/%d/cmdline 2>/dev/null || true", pid))
		sawJob = sawJob || strings.Contains(line, outSecret)
		for _, s := range []string{envSecret, exported, token} {
			if strings.Contains(line, s) {
				t.Errorf("%s sees %q in the command line of process %d: %q", u.Username, s, pid, line)
			}
		}
	}
	if !sawJob {
		t.Errorf("%s read no command line of ours (not even the job's): the check proves nothing", u.Username)
	}
	// Only what changed since the test began: other tests' files stay out.
	ref := filepath.Join(h.dir, "ref")
	os.WriteFile(ref, nil, 0o644)
	os.Chtimes(ref, start, start)
	// A file others may read, holding only a canary: the search must
	// find it, else it proves nothing.
	canary, mark := filepath.Join(h.dir, "canary"), fmt.Sprintf("canary-%d", time.Now().UnixNano())
	os.WriteFile(canary, []byte(mark+"\n"), 0o644)
	found := other(fmt.Sprintf("find /tmp /var/tmp /dev/shm -xdev -newer %s -type f -readable -size -64M -print0 2>/dev/null | xargs -0 -r grep -l -e %s -e %s -e %s -e %s -e %s 2>/dev/null || true",
		ref, mark, envSecret, exported, outSecret, token))
	if found != canary+"\n" {
		t.Errorf("%s can read secrets of ours in (the canary %s aside):\n%s", u.Username, canary, found)
	}
	os.WriteFile(gate, nil, 0o600)
	if d := h.waitState(1, "DF", time.Minute); d.State != "D" {
		t.Errorf("job 1 ended %s %q", d.State, d.Reason)
	}
}

// TestKeyNewPlantedPub: `cls key new` of a key in a shared directory,
// where mqagent put a link at KEY.pub to a file of ours first: the
// public key must not be written through it. The command fails in one
// line, leaves no private key behind, and accepts no key.
func TestKeyNewPlantedPub(t *testing.T) {
	u, _, _ := otherUser(t)
	h := newHarness(t)
	shared := otheruser.SharedDir(t, "mqe2e-shared-")
	victim := filepath.Join(h.dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(shared, "ph_key")
	if out, err := asOther(u.Username, fmt.Sprintf("ln -s %s %s.pub", victim, key)); err != nil {
		t.Fatalf("the attacker's setup failed: %v: %s", err, out)
	}
	r := h.run("cls", "key", "new", "--role", "placeholder", key)
	oneLineErr(t, "cls", r)
	if r.code == 0 || !strings.Contains(r.stderr, "is a symbolic link") {
		t.Errorf("cls key new with mqagent's link at %s.pub: %s; want refused", key, r)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the public key was written through mqagent's link: the victim holds %q", b)
	}
	if _, err := os.Lstat(key); err == nil {
		t.Errorf("the private key %s was left behind", key)
	}
	if out := h.ok("cls", "key", "list"); strings.Contains(out, "ph_key") {
		t.Errorf("a key was accepted: %s", out)
	}
}

// TestGuideBearerNotInArgv: the way the dashboard guide tells scripts to
// send the token (its curl line, run as written but for the token file
// and the address) works, and keeps the token out of curl's command
// line, which mqagent, another user, reads while the request is held.
func TestGuideBearerNotInArgv(t *testing.T) {
	u, _, _ := otherUser(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "guide", "dashboard.md"))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); strings.Contains(l, "curl ") && strings.Contains(l, "http.token") {
			line = l
		}
	}
	if line == "" {
		t.Fatal("the dashboard guide has no curl line with the token")
	}
	dir := t.TempDir()
	const token = "guide-token-6d41e0c2"
	tokFile := filepath.Join(dir, "http.token")
	os.WriteFile(tokFile, []byte(token+"\n"), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	line = strings.NewReplacer("~/.mq/http.token", tokFile, "127.0.0.1:8642", ln.Addr().String()).Replace(line)
	sh := exec.Command("sh", "-c", line)
	var out strings.Builder
	sh.Stdout = &out
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer sh.Process.Kill()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer "+token {
		t.Errorf("%s sent Authorization %q", line, got)
	}
	// The request is held: curl runs, a child of sh.
	var curl int
	waitFor(t, time.Minute, func() error {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			if f := strings.Fields(string(st)); len(f) > 3 && f[1] == "(curl)" && f[3] == fmt.Sprint(sh.Process.Pid) {
				curl, _ = strconv.Atoi(e.Name())
				return nil
			}
		}
		return fmt.Errorf("no curl process under sh %d", sh.Process.Pid)
	})
	argv, err := asOther(u.Username, fmt.Sprintf("cat /proc/%d/cmdline", curl))
	if err != nil || !strings.Contains(argv, "curl") {
		t.Fatalf("%s cannot read curl's command line: %v %q", u.Username, err, argv)
	}
	if strings.Contains(argv, token) {
		t.Errorf("the guide's curl line puts the token in curl's arguments, which %s reads: %q", u.Username, argv)
	}
	fmt.Fprint(conn, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
	conn.Close()
	if err := sh.Wait(); err != nil || out.String() != "ok\n" {
		t.Errorf("%s: %v, printed %q", line, err, out.String())
	}
}

// TestHomeThroughOtherUsersLink: MQ_HOME=/tmp/NAME, where mqagent made
// NAME first as a link to a directory of ours (a real home that passes
// every check): mqagent could repoint it between two commands, so
// cls serve and the clients refuse it, naming the link and its owner.
func TestHomeThroughOtherUsersLink(t *testing.T) {
	u, uid, _ := otherUser(t)
	h := newHarness(t)
	link := filepath.Join(filepath.Dir(h.home), fmt.Sprintf("mqe2e-link-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(link) })
	if out, err := asOther(u.Username, "ln -s "+h.home+" "+link); err != nil {
		t.Fatalf("the attacker's setup failed: %v: %s", err, out)
	}
	want := fmt.Sprintf("goes through %s, a link owned by uid %d", link, uid)
	viaLink := func(cmd ...string) {
		t.Helper()
		env := append(h.env(), "MQ_HOME="+link)
		r, err := runBin(90*time.Second, env, h.dir, nil, cmd[0], cmd[1:]...)
		if err == nil || r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s with MQ_HOME through mqagent's link: %s; want refused with %q", strings.Join(cmd, " "), r, want)
		}
	}
	viaLink("cls", "serve", "--local", "0")
	viaLink("cls", "key", "list")
	if _, err := os.Lstat(filepath.Join(h.home, "mq.db")); err == nil {
		t.Error("cls serve used the home behind mqagent's link")
	}
	// Our CLS, on the real path: a client sent there by the link refuses.
	h.startCLS("--local", "0")
	viaLink("mqstat")
	h.ok("mqstat")
}
