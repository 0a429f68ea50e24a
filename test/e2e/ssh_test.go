//go:build e2e

package e2e

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/otheruser"
	"github.com/mq-hpc/mq/protocol"
)

// The SSH suites drive `cls serve --ssh` with the system OpenSSH client as
// a user types it, and remote placeholders (`cls agent --cls`) as separate
// processes over real TCP. Each test has its own MQ_HOME, CLS and port.

// parseID reads the job id mqsub printed.
func parseID(t *testing.T, what string, r result) int64 {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: %s", what, r)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
	if err != nil {
		t.Fatalf("%s printed %q, not a job id", what, r.stdout)
	}
	return id
}

func idStr(id int64) string { return strconv.FormatInt(id, 10) }

// TestSSHUserCommands: a user key runs mqsub, mqsub -b, mqsub -f -, mqstat,
// mqstat -j, mqstat --output, mqdel and cls queue through the system ssh,
// with the quoting a shell user writes, and exit statuses pass through.
func TestSSHUserCommands(t *testing.T) {
	requireSSH(t)
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	user := h.newKey("user", "alice")
	s.startAgent(agentOpts{key: h.newKey("placeholder", "ph"), args: []string{"--slots", "2"}})

	// `ssh cls-host 'mqsub -q sshq greet "echo hello $MQ_JOB_ID; pwd"'`:
	// ssh sends one string; the CLS splits it like a shell without
	// expanding anything, so $MQ_JOB_ID reaches the job.
	greet := parseID(t, "ssh mqsub", s.ssh(user, `mqsub -q sshq greet "echo hello $MQ_JOB_ID; pwd"`))
	// -d picks the job's directory; without it jobs start in the CLS
	// user's home, as after an ssh login.
	there := parseID(t, "ssh mqsub -d", s.ssh(user, "mqsub", "-q", "sshq", "-d", h.dir, "there", "pwd"))

	// -b waits and passes the job's exit status through ssh.
	r := s.ssh(user, `mqsub -b -q sshq bad 'echo bye; exit 3'`)
	if r.code != 3 {
		t.Errorf("ssh mqsub -b of a job exiting 3: %s; want exit 3", r)
	}
	if r = s.ssh(user, "mqsub -b -q sshq good true"); r.code != 0 {
		t.Errorf("ssh mqsub -b of true: %s; want exit 0", r)
	}

	h.waitState(greet, "D", 15*time.Second)
	h.waitState(there, "D", 15*time.Second)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	r = s.ssh(user, "mqstat", "--output", idStr(greet))
	if want := fmt.Sprintf("hello %d\n%s\n", greet, home); r.code != 0 || r.stdout != want {
		t.Errorf("ssh mqstat --output %d: %s; want stdout %q", greet, r, want)
	}
	if got := h.ok("mqstat", "--output", idStr(there)); got != h.dir+"\n" {
		t.Errorf("job submitted with -d %s ran in %q", h.dir, got)
	}

	// mqstat lists them; -j shows one; --json parses.
	r = s.ssh(user, "mqstat -s DF")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("ssh mqstat: %s", r)
	}
	for _, target := range []string{"greet", "there", "bad", "good"} {
		if !strings.Contains(r.stdout, target) {
			t.Errorf("ssh mqstat -s DF does not list target %s:\n%s", target, r.stdout)
		}
	}
	r = s.ssh(user, "mqstat", "-j", idStr(greet))
	if r.code != 0 || !strings.Contains(r.stdout, "greet") || !strings.Contains(r.stdout, "remote") {
		t.Errorf("ssh mqstat -j %d: %s; want the target and the site", greet, r)
	}
	r = s.ssh(user, "mqstat", "-j", idStr(greet), "--json")
	var d sshJob
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.ID != greet || d.State != "D" || d.Site != "remote" || d.Cwd != home {
		t.Errorf("ssh mqstat -j %d --json: %v; %s", greet, err, r)
	}

	// mqdel: a job waiting on a target that never comes.
	waiting := parseID(t, "ssh mqsub -p", s.ssh(user, "mqsub -q sshq -p never w true"))
	if r = s.ssh(user, "mqdel", idStr(waiting)); r.code != 0 {
		t.Errorf("ssh mqdel %d: %s", waiting, r)
	}
	h.waitState(waiting, "X", time.Minute)

	// mqsub -f -: a job file on ssh's stdin, one transaction.
	var file strings.Builder
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&file, `{"target":"f%d","command":"echo file job %d","queue":"sshq","cwd":%q}`+"\n", i, i, h.dir)
	}
	r = s.sshIn(user, nil, strings.NewReader(file.String()), "mqsub -f -")
	ids := strings.Fields(r.stdout)
	if r.code != 0 || len(ids) != 3 {
		t.Fatalf("ssh mqsub -f - with 3 lines on stdin: %s; want 3 ids", r)
	}
	for i, ids := range ids {
		id, _ := strconv.ParseInt(ids, 10, 64)
		h.waitState(id, "D", 15*time.Second)
		if got := h.ok("mqstat", "--output", ids); got != fmt.Sprintf("file job %d\n", i) {
			t.Errorf("job %s from the file printed %q", ids, got)
		}
	}

	// cls queue list and set.
	r = s.ssh(user, "cls queue set sshq --ceiling 1h")
	if r.code != 0 || !strings.Contains(r.stdout, "1h0m0s") {
		t.Errorf("ssh cls queue set: %s", r)
	}
	r = s.ssh(user, "cls queue list")
	if r.code != 0 || !strings.Contains(r.stdout, "QUEUE") || !strings.Contains(r.stdout, "sshq") {
		t.Errorf("ssh cls queue list: %s", r)
	}

	// Bad input: one line on stderr, exit 2, as when run locally.
	for _, c := range []struct{ cmd, name string }{
		{"mqsub --bogus t true", "mqsub"},
		{"mqstat --bogus", "mqstat"},
		{"mqdel --bogus 1", "mqdel"},
		{"mqsub t", "mqsub"},
	} {
		r := s.ssh(user, c.cmd)
		if r.code != 2 {
			t.Errorf("ssh %s: %s; want exit 2", c.cmd, r)
		}
		oneLineErr(t, c.name, r)
	}
	for _, c := range []struct {
		cmd  string
		code int
		msg  string
	}{
		{"rm -rf /", 127, `mq: unknown command "rm"`},
		{"cls serve", 2, "only `cls queue` and `cls files` (and, with an admin key, `cls site`) run over SSH"},
		{`mqsub t "unterminated`, 2, "unterminated double quote"},
		{"mqhold 999999", 1, "job 999999 does not exist"},
		{"mqalter --priority 1 999999", 1, "job 999999 does not exist"},
		{"mqalter 5", 2, "nothing to change"},
		{"mqrls --bogus", 2, "unknown flag --bogus"},
	} {
		r := s.ssh(user, c.cmd)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("ssh %s: %s; want exit %d and one line with %q", c.cmd, r, c.code, c.msg)
		}
	}
}

// TestSSHAuthentication: only listed keys get in, only by public key, and
// a removed key is refused at its next connection.
func TestSSHAuthentication(t *testing.T) {
	requireSSH(t)
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	user := h.newKey("user", "alice")
	bob := h.newKey("user", "bob")

	// A key the CLS does not list.
	stranger := filepath.Join(h.home, "keys", "stranger")
	if r := h.exec(time.Minute, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", stranger); r.code != 0 {
		t.Fatalf("ssh-keygen: %s", r)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(readFile(t, stranger+".pub")))
	if err != nil {
		t.Fatal(err)
	}
	r := s.ssh(stranger, "mqstat")
	if r.code != 255 || !strings.Contains(r.stderr, "Permission denied (publickey)") {
		t.Errorf("ssh with an unknown key: %s; want exit 255, Permission denied (publickey)", r)
	}
	waitFor(t, time.Minute, func() error {
		log := readFile(t, filepath.Join(h.home, "cls.log"))
		if !strings.Contains(log, "unknown key refused") || !strings.Contains(log, ssh.FingerprintSHA256(pub)) {
			return fmt.Errorf("cls.log does not record the refused key %s", ssh.FingerprintSHA256(pub))
		}
		return nil
	})

	// Passwords and keyboard-interactive are never offered: the server's
	// list of methods that can continue is "publickey" alone.
	r = s.sshIn(user, []string{"-v", "-o", "PreferredAuthentications=password,keyboard-interactive",
		"-o", "PubkeyAuthentication=no"}, nil, "mqstat")
	if r.code != 255 || !strings.Contains(r.stderr, "Permission denied (publickey)") {
		t.Errorf("ssh with password/keyboard-interactive: %s; want exit 255", r)
	}
	var methods []string
	for _, line := range strings.Split(r.stderr, "\n") {
		if _, m, ok := strings.Cut(line, "Authentications that can continue: "); ok {
			methods = append(methods, strings.TrimSpace(m))
		}
	}
	if len(methods) == 0 {
		t.Errorf("ssh -v never showed the methods that can continue:\n%s", clip(r.stderr))
	}
	for _, m := range methods {
		if m != "publickey" {
			t.Errorf("the CLS offers authentication methods %q; want publickey only", m)
		}
	}

	// Both user keys work; remove one and it is refused at once, with
	// the CLS still running; the other still works.
	for _, k := range []string{user, bob} {
		if r := s.ssh(k, "mqstat"); r.code != 0 {
			t.Fatalf("ssh mqstat with %s: %s", filepath.Base(k), r)
		}
	}
	if out := h.ok("cls", "key", "remove", "bob"); !strings.Contains(out, "removed user key") {
		t.Errorf("cls key remove bob printed %q", out)
	}
	if out := h.ok("cls", "key", "list"); strings.Contains(out, "bob") || !strings.Contains(out, "alice") {
		t.Errorf("cls key list after removing bob:\n%s", out)
	}
	if r := s.ssh(bob, "mqstat"); r.code != 255 || !strings.Contains(r.stderr, "Permission denied (publickey)") {
		t.Errorf("ssh with a removed key: %s; want exit 255, Permission denied", r)
	}
	if r := s.ssh(user, "mqstat"); r.code != 0 {
		t.Errorf("ssh with the remaining key: %s", r)
	}
}

// TestSSHPlaceholderRole: a placeholder key runs no commands and, over the
// mq subsystem, may not submit, delete, list or administer; each refusal is
// logged with the key; oversized requests are refused without harm.
func TestSSHPlaceholderRole(t *testing.T) {
	requireSSH(t)
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	user := h.newKey("user", "alice")
	ph := h.newKey("placeholder", "ph")
	phFP := h.keyFP("ph")
	victim := h.submit("-p", "never", "victim", "echo secret")

	for _, cmd := range []string{"mqsub t true", "mqstat", "mqstat -j " + idStr(victim), "mqdel " + idStr(victim), "cls queue list"} {
		r := s.ssh(ph, cmd)
		if r.code != 1 || r.stderr != "mq: placeholder keys may not run commands\n" || r.stdout != "" {
			t.Errorf("ssh %s with a placeholder key: %s; want exit 1 and the refusal", cmd, r)
		}
	}
	if js := h.jobs(); len(js) != 1 || js[0].State != "W" {
		t.Errorf("after the refused commands the jobs are %+v; want only the untouched victim", js)
	}

	hello := `{"id":1,"op":"hello","body":{"proto":1,"role":"placeholder","client":"e2e"}}`
	replies, r := s.subsystem(ph, hello,
		`{"id":2,"op":"submit","body":{"jobs":[{"target":"x","command":"true","cwd":"/tmp"}]}}`,
		`{"id":3,"op":"delete","body":{"ids":[`+idStr(victim)+`]}}`,
		`{"id":4,"op":"stat","body":{}}`,
		`{"id":5,"op":"job","body":{"id":`+idStr(victim)+`}}`,
		`{"id":6,"op":"queue.set","body":{"name":"default","max_attempts":1}}`,
		`{"id":7,"op":"bulk.add","body":{"line":1,"jobs":[{"target":"x","command":"true","cwd":"/tmp"}]}}`,
	)
	if r.code != 0 {
		t.Errorf("ssh -s mq with a placeholder key ended with %s; want exit 0 after stdin ends", r)
	}
	if !strings.Contains(string(replies[1]), `"role":"placeholder"`) {
		t.Errorf("hello over the subsystem: %s", replies[1])
	}
	for id := uint64(2); id <= 7; id++ {
		if !strings.Contains(string(replies[id]), `"code":"forbidden"`) {
			t.Errorf("placeholder request %d over the subsystem: reply %s; want forbidden", id, replies[id])
		}
	}
	if strings.Contains(r.stdout, "secret") {
		t.Errorf("the placeholder key read another job's command:\n%s", r.stdout)
	}
	// The key may not claim the user role either.
	replies, _ = s.subsystem(ph, `{"id":1,"op":"hello","body":{"proto":1,"role":"user","client":"e2e"}}`,
		`{"id":2,"op":"submit","body":{"jobs":[{"target":"x","command":"true","cwd":"/tmp"}]}}`)
	if !strings.Contains(string(replies[1]), `"code":"forbidden"`) || strings.Contains(string(replies[2]), `"ids"`) {
		t.Errorf("placeholder key saying hello as user: %s / %s; want forbidden", replies[1], replies[2])
	}
	if d := h.job(victim); d.State != "W" {
		t.Errorf("victim job is %s after the placeholder's attempts; want W", d.State)
	}
	if js := h.jobs(); len(js) != 1 {
		t.Errorf("the placeholder key added jobs: %+v", js)
	}

	// Refusals are in the log, naming the key.
	log := readFile(t, filepath.Join(h.home, "cls.log"))
	for _, want := range []string{"refused a command from a placeholder key", "refused request outside the placeholder role",
		"refused a role the connection does not allow"} {
		found := false
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, want) && strings.Contains(line, phFP) {
				found = true
			}
		}
		if !found {
			t.Errorf("cls.log has no line %q naming key %s:\n%s", want, phFP, clip(log))
		}
	}

	// Malformed and oversized requests are errors; the CLS lives on.
	big := `{"id":9,"op":"summary","body":{"pad":"` + strings.Repeat("x", 5<<20) + `"}}`
	_, r = s.subsystem(user, `{"id":1,"op":"hello","body":{"proto":1,"role":"user","client":"e2e"}}`,
		`{"id":2,"op":`, big)
	if n := strings.Count(r.stdout, `"code":"bad_request"`); n != 2 {
		t.Errorf("a malformed and an oversized frame got %d bad_request replies; want 2: %s", n, r)
	}
	if r := s.ssh(user, "mqstat -j "+idStr(victim)); r.code != 0 || h.cls.exited() {
		t.Errorf("CLS after bad frames: %s (exited %v)", r, h.cls.exited())
	}
}

// TestSSHAgentHostKeyPinning: an agent stops at once, saying why, when
// the CLS's host key is not the pinned one or its own key is not accepted.
func TestSSHAgentHostKeyPinning(t *testing.T) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	ph := h.newKey("placeholder", "ph")
	other := h.newKey("user", "other") // a real key that is not the host's
	otherFP := h.keyFP("other")
	id := h.submit("t", "true")
	// Half the 10 min (--reconnect) an agent that retried would go on for.
	const atOnce = 5 * time.Minute

	for _, pin := range []string{otherFP, other + ".pub"} {
		start := time.Now()
		a := s.startAgent(agentOpts{key: ph, hostKey: pin})
		st := a.wait(t, atOnce)
		took := time.Since(start)
		t.Logf("agent pinned to %s exited after %v", pin, took.Round(time.Millisecond))
		if st.Success() || took > atOnce {
			t.Errorf("agent pinned to %s: %v after %v; want a non-zero exit within %v", pin, st, took, atOnce)
		}
		if msg := a.stderr.String(); !strings.Contains(msg, "host key does not match") || !strings.Contains(msg, s.hostFP) {
			t.Errorf("agent pinned to %s said %q; want the mismatch named with the offered key %s", pin, msg, s.hostFP)
		}
	}
	if js := h.jobs("-s", "Q"); len(js) != 1 {
		t.Errorf("a job ran although no agent trusted the CLS: %+v", js)
	}

	// A key the CLS does not take is permanent too: no retry loop.
	h.ok("cls", "key", "remove", "ph")
	a := s.startAgent(agentOpts{key: ph})
	if st := a.wait(t, atOnce); st.Success() || !strings.Contains(a.stderr.String(), "refused this key") {
		t.Errorf("agent with a removed key: %v, %q; want a non-zero exit saying the key was refused", st, a.stderr.String())
	}

	// The right pin works, as fingerprint and as a file.
	h.newKey("placeholder", "ph2")
	pubFile := filepath.Join(h.home, "cls_host.pub")
	os.WriteFile(pubFile, []byte(strings.Split(h.ok("cls", "key", "host"), "\n")[1]+"\n"), 0o644)
	ok := s.startAgent(agentOpts{key: filepath.Join(h.home, "keys", "ph2"), hostKey: pubFile})
	ok.waitConnected(t, 1, time.Minute)
	h.waitState(id, "D", time.Minute)
}

// TestSSHKeysNeverLeak: keys made by cls are 0600 and no private key
// material shows up in the CLS's log or an agent's stderr, even at debug
// level after logins, refusals, jobs and staging.
func TestSSHKeysNeverLeak(t *testing.T) {
	requireSSH(t)
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0", "--log-level", "debug")
	user := h.newKey("user", "alice")
	ph := h.newKey("placeholder", "ph")
	hostKey := filepath.Join(h.home, "ssh_host_ed25519_key")
	for _, k := range []string{user, ph, hostKey} {
		st, err := os.Stat(k)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("private key %s has mode %04o; want 0600", k, st.Mode().Perm())
		}
		if !strings.HasPrefix(readFile(t, k), "-----BEGIN OPENSSH PRIVATE KEY-----\n") {
			t.Errorf("%s is not an OpenSSH private key", k)
		}
		if _, err := os.Stat(k + ".pub"); err != nil {
			t.Errorf("no public key beside %s: %v", k, err)
		}
	}
	// A world-readable key is refused before it is used, as OpenSSH does.
	loose := filepath.Join(h.home, "keys", "loose")
	os.WriteFile(loose, []byte(readFile(t, ph)), 0o644)
	os.Chmod(loose, 0o644)
	a := s.startAgent(agentOpts{key: loose})
	if st := a.wait(t, time.Minute); st.Success() || !strings.Contains(a.stderr.String(), "readable by others") {
		t.Errorf("agent with a 0644 key: %v, %q; want a refusal", st, a.stderr.String())
	}

	a = s.startAgent(agentOpts{key: ph, args: []string{"--log-level", "debug"}})
	id := parseID(t, "ssh mqsub", s.ssh(user, "mqsub", "-d", h.dir, "t", "'echo out; echo err >&2'"))
	h.waitState(id, "D", 15*time.Second)
	s.ssh(ph, "mqstat")                                                                    // refused command
	s.subsystem(ph, `{"id":1,"op":"hello","body":{"proto":1,"role":"user","client":"x"}}`) // refused role
	s.ssh(user, "mqstat --output", idStr(id))

	logs := map[string]string{"cls.log": readFile(t, filepath.Join(h.home, "cls.log")), "agent stderr": a.stderr.String()}
	if !strings.Contains(logs["cls.log"], "level=DEBUG") {
		t.Fatalf("cls.log has no debug lines; the check would prove little:\n%s", clip(logs["cls.log"]))
	}
	for _, k := range []string{user, ph, hostKey} {
		for _, secret := range privateKeyForms(t, k) {
			for name, text := range logs {
				if strings.Contains(text, secret) {
					t.Errorf("%s contains private key material of %s (%q)", name, filepath.Base(k), secret)
				}
			}
		}
	}
	for name, text := range logs {
		if strings.Contains(text, "PRIVATE KEY") {
			t.Errorf("%s mentions a PRIVATE KEY block", name)
		}
	}
}

// privateKeyForms returns strings that would betray a private key: every
// base64 line of its file, and its ed25519 seed in base64 and hex.
func privateKeyForms(t *testing.T, path string) []string {
	t.Helper()
	data := readFile(t, path)
	var forms []string
	for _, line := range strings.Split(data, "\n") {
		if len(line) >= 24 && !strings.HasPrefix(line, "-----") {
			forms = append(forms, line)
		}
	}
	raw, err := ssh.ParseRawPrivateKey([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	var seed []byte
	switch k := raw.(type) {
	case *ed25519.PrivateKey:
		seed = k.Seed()
	case ed25519.PrivateKey:
		seed = k.Seed()
	default:
		t.Fatalf("%s: unexpected key type %T", path, raw)
	}
	return append(forms, base64.StdEncoding.EncodeToString(seed)[:40], base64.RawURLEncoding.EncodeToString(seed)[:40],
		hex.EncodeToString(seed)[:40])
}

// TestSSHAgentStagesOutput: a remote agent's jobs' stdout and stderr reach
// the CLS host, where mqstat --output prints them; outputs over 1 MiB go in
// chunks and arrive byte for byte. In either output mode: files (each
// output copied on its own) and the default, streams (the agent's stream
// file shipped in pieces, the CLS's copy the very bytes of the agent's).
func TestSSHAgentStagesOutput(t *testing.T) {
	for _, mode := range []string{"streams", "files"} {
		t.Run(mode, func(t *testing.T) { testSSHAgentStagesOutput(t, mode) })
	}
}

func testSSHAgentStagesOutput(t *testing.T, mode string) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0", "--output", mode)
	a := s.startAgent(agentOpts{key: h.newKey("placeholder", "ph"), site: "far"})

	small := h.submit("small", "echo out-$MQ_JOB_ID; echo err-$MQ_ATTEMPT >&2")
	// 3 MiB + 17 bytes of binary stdout (4 chunks), 1 MiB + 1 of stderr (2).
	rng := rand.New(rand.NewPCG(1, 2))
	mk := func(name string, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		if err := os.WriteFile(filepath.Join(h.dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return b
	}
	bigOut, bigErr := mk("out.bin", 3<<20+17), mk("err.bin", 1<<20+1)
	big := h.submit("big", "cat out.bin; cat err.bin >&2")
	silent := h.submit("silent", "true")

	for _, id := range []int64{small, big, silent} {
		h.waitState(id, "D", 20*time.Second)
	}
	if got := h.ok("mqstat", "--output", idStr(small)); got != "out-"+idStr(small)+"\n" {
		t.Errorf("--output %d printed %q", small, got)
	}
	if got := h.ok("mqstat", "--output", idStr(small), "--stderr"); got != "err-1\n" {
		t.Errorf("--output %d --stderr printed %q", small, got)
	}
	if got := h.ok("mqstat", "--output", idStr(silent)); got != "" {
		t.Errorf("--output of a silent job printed %q", got)
	}
	sum := func(b []byte) string { return fmt.Sprintf("%d bytes sha256 %x", len(b), sha256.Sum256(b)) }
	if got := h.ok("mqstat", "--output", idStr(big)); sum([]byte(got)) != sum(bigOut) {
		t.Errorf("--output %d: %s, want %s", big, sum([]byte(got)), sum(bigOut))
	}
	if got := h.ok("mqstat", "--output", idStr(big), "--stderr"); sum([]byte(got)) != sum(bigErr) {
		t.Errorf("--output %d --stderr: %s, want %s", big, sum([]byte(got)), sum(bigErr))
	}

	d := h.sshJob(big)
	if mode == "streams" {
		// Both outputs in a stream file of the CLS's, the copy of the
		// agent's own.
		streams := filepath.Join(h.home, "output", protocol.StreamDir) + "/"
		for _, e := range []*protocol.StreamExtent{d.StdoutStream, d.StderrStream} {
			if e == nil || !strings.HasPrefix(e.Path, streams) {
				t.Fatalf("job %d: stdout stream %+v, stderr stream %+v; want both under %s", big, d.StdoutStream, d.StderrStream, streams)
			}
			cp := readFile(t, e.Path)
			if site := readFile(t, filepath.Join(a.out, protocol.StreamDir, filepath.Base(e.Path))); cp != site {
				t.Errorf("%s: the CLS's copy (%d bytes) is not the agent's file (%d bytes)", e.Path, len(cp), len(site))
			}
		}
		if d.Site != "far" {
			t.Errorf("job %d: site %q, want far", big, d.Site)
		}
		return
	}
	// mqstat -j says where each file is: the agent's on its host, the copy
	// in the CLS's output directory.
	if d.Site != "far" || !strings.HasPrefix(d.Stdout, a.out+"/") || !strings.HasPrefix(d.Stderr, a.out+"/") {
		t.Errorf("job %d: site %q, stdout %q, stderr %q; want site far and files under the agent's %s", big, d.Site, d.Stdout, d.Stderr, a.out)
	}
	cls := filepath.Join(h.home, "output") + "/"
	if !strings.HasPrefix(d.StdoutCopy, cls) || !strings.HasPrefix(d.StderrCopy, cls) {
		t.Errorf("job %d: copies at %q and %q; want them under %s", big, d.StdoutCopy, d.StderrCopy, cls)
	}
	for _, f := range []struct {
		path string
		want []byte
	}{{d.Stdout, bigOut}, {d.StdoutCopy, bigOut}, {d.Stderr, bigErr}, {d.StderrCopy, bigErr}} {
		if got := readFile(t, f.path); sum([]byte(got)) != sum(f.want) {
			t.Errorf("%s: %s, want %s", f.path, sum([]byte(got)), sum(f.want))
		}
	}
}

// TestSSHAgentKilled: kill -9 an agent while its job runs; after the lease
// the job runs again on another agent and the first attempt stays in its
// history.
func TestSSHAgentKilled(t *testing.T) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0", "--lease", "2s")
	ph := h.newKey("placeholder", "ph")
	first := s.startAgent(agentOpts{key: ph, site: "first"})
	first.waitConnected(t, 1, time.Minute)
	id := h.submit("t", "mkdir -p runs; echo $MQ_ATTEMPT >> runs/$MQ_JOB_ID; echo $$ > pid.$MQ_ATTEMPT; sleep 2; echo finished attempt $MQ_ATTEMPT")
	d := h.waitState(id, "E", time.Minute)
	waitFile(t, filepath.Join(h.dir, "pid.1"), time.Minute)
	pid1 := readPid(t, filepath.Join(h.dir, "pid.1"))
	if d.Site != "first" {
		t.Fatalf("job runs at site %q, want first", d.Site)
	}
	second := s.startAgent(agentOpts{key: ph, site: "second"})
	second.waitConnected(t, 1, time.Minute)
	killed := time.Now()
	first.kill9(t)
	// The job dies with its placeholder (no orphan running on unseen while
	// its rerun starts elsewhere): within half the 2 s lease, after which
	// the rerun may start.
	for deadline := time.Now().Add(time.Second); alive(pid1); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("attempt 1 (pid %d) outlived its killed placeholder", pid1)
			break
		}
	}

	d = h.waitState(id, "D", 20*time.Second)
	t.Logf("done %v after the kill", time.Since(killed).Round(time.Millisecond))
	if d.Site != "second" || d.Attempts != 2 {
		t.Errorf("job ended at site %q after %d attempts; want second, 2", d.Site, d.Attempts)
	}
	if len(d.History) != 1 || d.History[0].Attempt != 1 || d.History[0].Site != "first" || d.History[0].Reason == "" {
		t.Errorf("history %+v; want attempt 1 at site first with a reason", d.History)
	} else {
		t.Logf("attempt 1 ended with reason %q", d.History[0].Reason)
	}
	if runs := runLog(t, h.dir, id); !slices.Equal(runs, []string{"1", "2"}) {
		t.Errorf("job started %v times; want attempts 1 and 2", runs)
	}
	if got := h.ok("mqstat", "--output", idStr(id)); got != "finished attempt 2\n" {
		t.Errorf("--output printed %q", got)
	}
}

// TestSSHConnectionCut: the agent's connection dies (through a proxy that
// resets it) mid-job: the job goes on, the agent reconnects through the
// proxy and reports it once, with its output.
func TestSSHConnectionCut(t *testing.T) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0", "--lease", "2s")
	proxy := startProxy(t, s.addr)
	a := s.startAgent(agentOpts{key: h.newKey("placeholder", "ph"), addr: proxy.addr()})
	a.waitConnected(t, 1, time.Minute)

	id := h.submit("t", "mkdir -p runs; echo $MQ_ATTEMPT >> runs/$MQ_JOB_ID; echo $$ > pid; sleep 3; echo done")
	h.waitState(id, "E", time.Minute)
	waitFile(t, filepath.Join(h.dir, "pid"), time.Minute)
	pid := readPid(t, filepath.Join(h.dir, "pid"))
	time.Sleep(300 * time.Millisecond)

	// Cut, and refuse new connections for a moment so the agent must
	// retry with backoff.
	proxy.down.Store(true)
	if n := proxy.cut(); n != 1 {
		t.Fatalf("cut %d connections; want the agent's one", n)
	}
	time.Sleep(500 * time.Millisecond)
	if !alive(pid) {
		t.Errorf("the job (pid %d) died with the connection", pid)
	}
	proxy.down.Store(false)
	a.waitConnected(t, 2, time.Minute)
	if proxy.accepted.Load() < 2 {
		t.Errorf("the proxy carried %d connections; the agent did not reconnect through it", proxy.accepted.Load())
	}

	d := h.waitState(id, "D", 15*time.Second)
	if d.Attempts != 1 || len(d.History) != 0 || d.Exit == nil || *d.Exit != 0 {
		t.Errorf("job after the cut: attempts %d, history %+v, exit %v; want one clean attempt", d.Attempts, d.History, d.Exit)
	}
	if runs := runLog(t, h.dir, id); !slices.Equal(runs, []string{"1"}) {
		t.Errorf("job started %v times; want once", runs)
	}
	if got := h.ok("mqstat", "--output", idStr(id)); got != "done\n" {
		t.Errorf("--output printed %q; want the staged \"done\"", got)
	}
	if log := readFile(t, filepath.Join(h.home, "cls.log")); strings.Contains(log, "lease expired") {
		t.Errorf("a lease expired although the agent reconnected in time:\n%s", clip(log))
	}
	if a.exited() {
		t.Errorf("agent exited: %s", a.stderr.String())
	}
	// It keeps working on the new connection.
	next := h.submit("t2", "true")
	h.waitState(next, "D", time.Minute)
}

// TestSSHCLSRestart: SIGKILL the CLS while SSH agents run jobs and restart
// it on the same port: the agents reconnect and report, every job ends D,
// and no job ran more often than its recorded attempts.
func TestSSHCLSRestart(t *testing.T) {
	const n = 16
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0", "--lease", "2s")
	ph := h.newKey("placeholder", "ph")
	agents := []*agentProc{
		s.startAgent(agentOpts{key: ph, site: "a", args: []string{"--slots", "2"}}),
		s.startAgent(agentOpts{key: ph, site: "b", args: []string{"--slots", "2"}}),
	}
	var file strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&file, `{"target":"j%d","command":"mkdir -p runs; echo $MQ_ATTEMPT >> runs/$MQ_JOB_ID; sleep 0.8; echo ran $MQ_JOB_ID"}`+"\n", i)
	}
	r := h.runIn(h.dir, strings.NewReader(file.String()), "mqsub", "-f", "-")
	if r.code != 0 || len(strings.Fields(r.stdout)) != n {
		t.Fatalf("mqsub -f -: %s", r)
	}
	waitFor(t, 20*time.Second, func() error {
		c := h.summary()["default"]
		if c["D"] >= 3 && c["E"] >= 2 {
			return nil
		}
		return fmt.Errorf("not yet mid-run: %v", c)
	})
	running := h.jobs("-s", "E") // their reports come after the restart
	h.stopCLS(syscall.SIGKILL, time.Minute)
	t.Logf("CLS killed with %d jobs running", len(running))
	time.Sleep(700 * time.Millisecond) // jobs end and reports wait meanwhile
	s.start()

	var sum map[string]int
	waitFor(t, 25*time.Second, func() error {
		sum = h.summary()["default"]
		if sum["D"] == n {
			return nil
		}
		return fmt.Errorf("after the restart: %v", sum)
	})
	for _, a := range agents {
		if a.exited() {
			t.Errorf("agent %s exited: %s", a.site, a.stderr.String())
		} else if a.connects() < 2 {
			t.Errorf("agent %s connected %d times; want a reconnect", a.site, a.connects())
		}
	}
	reruns := 0
	for _, j := range h.jobs() {
		runs := runLog(t, h.dir, j.ID)
		want := make([]string, j.Attempts)
		for i := range want {
			want[i] = strconv.Itoa(i + 1)
		}
		if j.State != "D" || !slices.Equal(runs, want) {
			t.Errorf("job %d: state %s, %d attempts recorded, runs %v; want D and one run per attempt", j.ID, j.State, j.Attempts, runs)
		}
		if j.Attempts > 1 {
			reruns++
		}
		if got := h.ok("mqstat", "--output", idStr(j.ID)); got != "ran "+idStr(j.ID)+"\n" {
			t.Errorf("job %d output %q", j.ID, got)
		}
	}
	// At least one job that ran across the crash was reported after it,
	// on its first attempt: the restart was survived, not just re-run.
	carried := 0
	for _, j := range running {
		if h.job(j.ID).Attempts == 1 {
			carried++
		}
	}
	if carried == 0 {
		t.Errorf("none of the %d jobs running at the crash was reported on its first attempt", len(running))
	}
	t.Logf("%d jobs, %d re-run after a lease expiry, %d of %d running at the crash reported after the restart", n, reruns, carried, len(running))
}

// TestSSHDeleteRunning: mqdel (over ssh) of a job running on a remote
// agent kills its whole process group (its sleep 300 does not run on),
// with the default lease.
func TestSSHDeleteRunning(t *testing.T) {
	requireSSH(t)
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	user := h.newKey("user", "alice")
	a := s.startAgent(agentOpts{key: h.newKey("placeholder", "ph")})
	id := h.submit("t", "echo $$ > pid; sleep 300 & echo $! > child; wait")
	h.waitState(id, "E", time.Minute)
	waitFile(t, filepath.Join(h.dir, "child"), time.Minute)
	pgid, child := readPid(t, filepath.Join(h.dir, "pid")), readPid(t, filepath.Join(h.dir, "child"))
	if st, _ := readStat(child); !alive(pgid) || st.pgid != pgid {
		t.Fatalf("job processes: shell %d alive %v, child %d in group %d", pgid, alive(pgid), child, st.pgid)
	}
	if r := s.ssh(user, "mqdel", idStr(id)); r.code != 0 {
		t.Fatalf("ssh mqdel: %s", r)
	}
	start := time.Now()
	// Half the sleep 300 a group left alive would run on for.
	waitFor(t, 150*time.Second, func() error {
		if m := groupMembers(pgid); len(m) > 0 {
			return fmt.Errorf("process group %d still has %v", pgid, m)
		}
		return nil
	})
	t.Logf("process group gone %v after mqdel returned", time.Since(start).Round(time.Millisecond))
	h.waitState(id, "X", time.Minute)
	if a.exited() {
		t.Fatalf("agent exited: %s", a.stderr.String())
	}
	h.waitState(h.submit("t2", "true"), "D", time.Minute)
}

// TestSSHCeiling: a job outliving its queue's ceiling is killed on the
// remote agent and marked F with reason ceiling.
func TestSSHCeiling(t *testing.T) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	s.startAgent(agentOpts{key: h.newKey("placeholder", "ph")})
	h.ok("cls", "queue", "set", "short", "--ceiling", "2")
	id := h.submit("-q", "short", "t", "echo $$ > pid; sleep 30")
	h.waitState(id, "E", time.Minute)
	waitFile(t, filepath.Join(h.dir, "pid"), time.Minute)
	pid := readPid(t, filepath.Join(h.dir, "pid"))
	d := h.waitState(id, "F", time.Minute)
	if !strings.Contains(d.Reason, "ceiling") {
		t.Errorf("job failed with reason %q; want the ceiling named", d.Reason)
	}
	ran := parseTime(t, "finished", d.Finished).Sub(parseTime(t, "started", d.Started))
	if ran < 2*time.Second || ran > 5*time.Second {
		t.Errorf("job ran %v; want it killed at its 2 s ceiling", ran)
	}
	if alive(pid) {
		t.Errorf("job process %d still alive", pid)
	}
}

// TestSSHWalltime: an agent with 3 min of walltime left never takes a job
// estimated at 1000 s, but takes one of 1 s. (3 min: the waits below end
// well inside it.)
func TestSSHWalltime(t *testing.T) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	a := s.startAgent(agentOpts{key: h.newKey("placeholder", "ph"), args: []string{"--walltime", "3m"}})
	long := h.submit("--est", "1000", "long", "echo ran")
	short := h.submit("--est", "1", "short", "echo ran")
	a.waitConnected(t, 1, time.Minute)
	h.waitState(short, "D", time.Minute)
	time.Sleep(time.Second) // time for a wrong dispatch to show
	if d := h.job(long); d.State != "Q" || d.Attempts != 0 {
		t.Errorf("the 1000 s job is %s after %d attempts on a 3 min placeholder; want Q, 0", d.State, d.Attempts)
	}
}

// TestSSHAgentOtherUser: the agent runs as another, unprivileged user than
// the CLS (root here): its jobs run as that user and their output reaches
// the CLS; in either output mode (files, and the default, streams: the
// agent's stream file is that user's, the CLS's copy the CLS's user's).
func TestSSHAgentOtherUser(t *testing.T) {
	for _, mode := range []string{"streams", "files"} {
		t.Run(mode, func(t *testing.T) { testSSHAgentOtherUser(t, mode) })
	}
}

func testSSHAgentOtherUser(t *testing.T, mode string) {
	u, uid, gid := otherUser(t)
	name := u.Username

	h := newHarness(t)
	s := h.startSSHCLS("--local", "0", "--output", mode)
	ph := h.newKey("placeholder", "ph")

	// The agent's world, owned by mqagent: a directory in its home with the
	// key (0600), the output directory and the jobs' working directory; the
	// cls binary where mqagent can run it.
	dir, err := os.MkdirTemp(u.HomeDir, "mqe2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, err := os.MkdirTemp("", "mqe2e-agentbin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	os.Chmod(bin, 0o755)
	exe := filepath.Join(bin, "cls")
	if err := os.WriteFile(exe, []byte(readFile(t, filepath.Join(binDir, "cls"))), 0o755); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "ph")
	if err := os.WriteFile(key, []byte(readFile(t, ph)), 0o600); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o700)
	for _, p := range []string{dir, key, work} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}

	a := s.startAgent(agentOpts{key: key, site: "other", out: filepath.Join(dir, "out"), bin: exe,
		dir: work, prefix: []string{"runuser", "-u", name, "--"}})
	// Kill the agent (runuser's child) and its jobs before their
	// directory goes.
	t.Cleanup(h.killAll)
	a.waitConnected(t, 1, time.Minute)
	id := h.submit("-d", work, "t", "id -un; touch made-by-job; echo to-stderr >&2")
	d := h.waitState(id, "D", 15*time.Second)
	if got := h.ok("mqstat", "--output", idStr(id)); got != name+"\n" {
		t.Errorf("job ran as %q; want %s", strings.TrimSpace(got), name)
	}
	if got := h.ok("mqstat", "--output", idStr(id), "--stderr"); got != "to-stderr\n" {
		t.Errorf("staged stderr %q", got)
	}
	if d.Site != "other" {
		t.Errorf("job ran at site %q", d.Site)
	}
	// Files: what the job made and its output on the agent side belong to
	// mqagent; the copies on the CLS side to the CLS's user.
	jd := h.sshJob(id)
	owners := map[string]int{filepath.Join(work, "made-by-job"): uid, jd.Stdout: uid, jd.StdoutCopy: os.Geteuid()}
	if mode == "streams" {
		if jd.StdoutStream == nil {
			t.Fatalf("job %d's stdout is not in a stream: %+v", id, jd)
		}
		owners = map[string]int{filepath.Join(work, "made-by-job"): uid,
			filepath.Join(a.out, protocol.StreamDir, filepath.Base(jd.StdoutStream.Path)): uid, jd.StdoutStream.Path: os.Geteuid()}
	}
	for path, wantUID := range owners {
		st, err := os.Stat(path)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if got := int(st.Sys().(*syscall.Stat_t).Uid); got != wantUID {
			t.Errorf("%s is owned by uid %d; want %d", path, got, wantUID)
		}
	}
	// And the agent process itself runs as mqagent.
	found := false
	for _, pid := range h.ownProcs() {
		if strings.HasPrefix(cmdline(pid), exe+" agent") { // not runuser's own line
			found = true
			if got := procUID(pid); got != uid {
				t.Errorf("agent pid %d runs as uid %d; want %d", pid, got, uid)
			}
		}
	}
	if !found {
		t.Errorf("no agent process found")
	}
}

// otherUser returns the unprivileged user mqagent (made if missing), whom
// tests run programs as with runuser; it skips the test unless it runs as
// root with useradd and runuser (otheruser.Need).
func otherUser(t *testing.T) (u *user.User, uid, gid int) { return otheruser.Need(t) }

// keyFP is the fingerprint `cls key list` shows for the key called name.
func (h *harness) keyFP(name string) string {
	h.t.Helper()
	out := h.ok("cls", "key", "list")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[3] == name {
			return f[1]
		}
	}
	h.t.Fatalf("cls key list shows no key %s:\n%s", name, out)
	return ""
}

// procUID is a process's real uid from /proc/PID/status.
func procUID(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// TestSSHAgentOnCLSHost: an agent started on the CLS's own host with the
// CLS's output directory as its --out (cls agent --cls ... left without
// --out, as docs/guide/security.md's line reads when tried on one machine)
// writes its stream files where the CLS reads them: its jobs' output is
// there for mqstat --output, not reported lost.
func TestSSHAgentOnCLSHost(t *testing.T) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	a := s.startAgent(agentOpts{key: h.newKey("placeholder", "ph"), site: "here", out: filepath.Join(h.home, "output")})
	id := h.submit("t", "echo out-$MQ_JOB_ID; echo err >&2")
	h.waitState(id, "D", 30*time.Second)
	if got := h.ok("mqstat", "--output", idStr(id)); got != "out-"+idStr(id)+"\n" {
		t.Errorf("--output %d printed %q", id, got)
	}
	if got := h.ok("mqstat", "--output", idStr(id), "--stderr"); got != "err\n" {
		t.Errorf("--output %d --stderr printed %q", id, got)
	}
	if strings.Contains(a.stderr.String(), "could not copy") {
		t.Errorf("the agent could not ship its own stream file:\n%s", a.stderr.String())
	}
}
