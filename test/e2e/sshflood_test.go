//go:build e2e

package e2e

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/sshkey"
)

// Peers that flood the SSH endpoint, with a key or without one, driven by
// x/crypto/ssh from the test process over loopback.

// mqConn is one request-protocol session over SSH (subsystem mq).
type mqConn struct {
	c  *ssh.Client
	in io.WriteCloser
	r  *bufio.Reader
}

// sshDial is ssh.Dial with a bound on the whole handshake (ssh.Dial's
// Timeout bounds only the TCP connect), so a test cannot hang on it.
func sshDial(addr, user string, signer ssh.Signer) (*ssh.Client, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	sc, chans, reqs, err := ssh.NewClientConn(nc, addr, &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}

// dialMQ logs in with signer and opens the mq subsystem.
func dialMQ(addr string, signer ssh.Signer) (*mqConn, error) {
	c, err := sshDial(addr, "flood", signer)
	if err != nil {
		return nil, err
	}
	// NewSession can wait forever if the connection closes as it asks
	// (an x/crypto race): bound it.
	type opened struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := c.NewSession()
		ch <- opened{s, err}
	}()
	var sess *ssh.Session
	select {
	case o := <-ch:
		if o.err != nil {
			c.Close()
			return nil, o.err
		}
		sess = o.s
	case <-time.After(30 * time.Second):
		c.Close()
		return nil, fmt.Errorf("no session within 30 s")
	}
	in, _ := sess.StdinPipe()
	out, _ := sess.StdoutPipe()
	if err := sess.RequestSubsystem("mq"); err != nil {
		c.Close()
		return nil, err
	}
	return &mqConn{c: c, in: in, r: bufio.NewReader(out)}, nil
}

// mustDialMQ is dialMQ for a login that must succeed; the test's end
// closes the connection.
func mustDialMQ(t *testing.T, addr string, signer ssh.Signer) *mqConn {
	t.Helper()
	m, err := dialMQ(addr, signer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.c.Close() })
	return m
}

// call sends one request and returns its reply's error code ("" for none).
func (m *mqConn) call(id int, op string, body any) (string, error) {
	code, _, err := m.callBody(id, op, body)
	return code, err
}

// callBody is call that also returns the reply's body.
func (m *mqConn) callBody(id int, op string, body any) (string, json.RawMessage, error) {
	// A reply that never comes fails the call rather than the test's
	// deadline.
	stuck := time.AfterFunc(30*time.Second, func() { m.c.Close() })
	defer stuck.Stop()
	b, _ := json.Marshal(body)
	if _, err := fmt.Fprintf(m.in, `{"id":%d,"op":%q,"body":%s}`+"\n", id, op, b); err != nil {
		return "", nil, err
	}
	for {
		line, err := m.r.ReadBytes('\n')
		if err != nil {
			return "", nil, err
		}
		var resp struct {
			ID   int             `json:"id"`
			Body json.RawMessage `json:"body"`
			Err  *struct {
				Code string `json:"code"`
			} `json:"err"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return "", nil, err
		}
		if resp.ID != id {
			continue // a parked poll's reply, or a refused one
		}
		if resp.Err != nil {
			return resp.Err.Code, nil, nil
		}
		return "", resp.Body, nil
	}
}

func (m *mqConn) send(id int, op string, body any) error {
	b, _ := json.Marshal(body)
	_, err := fmt.Fprintf(m.in, `{"id":%d,"op":%q,"body":%s}`+"\n", id, op, b)
	return err
}

func loadSigner(t *testing.T, path string) ssh.Signer {
	t.Helper()
	s, err := sshkey.LoadSigner(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func logSize(t *testing.T, h *harness) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(h.home, "cls.log"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// Keyless logins with long user names leave cls.log small: the name is cut
// and escaped, and refusals from one address are counted, not logged one
// by one. (2,000 such logins once grew cls.log by 381 MiB in 3.9 s.)
func TestSSHKeylessLoginsKeepLogSmall(t *testing.T) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	stranger, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	before := logSize(t, h)
	name := "\x1b[2J" + strings.Repeat("A", 200<<10)
	const logins = 300
	for range logins {
		c, err := sshDial(s.addr, name, stranger)
		if err == nil {
			c.Close()
			t.Fatal("an unknown key was let in")
		}
	}
	h.ok("mqstat") // the CLS serves its owner meanwhile
	if grew := logSize(t, h) - before; grew > 16<<10 {
		t.Fatalf("%d keyless logins grew cls.log by %d bytes; want at most 16 KiB", logins, grew)
	}
	h.stopCLS(syscall.SIGTERM, 30*time.Second) // logs the counts not yet logged
	log := readFile(t, filepath.Join(h.home, "cls.log"))
	if strings.Contains(log, "\x1b") {
		t.Error("a control character from a user name reached cls.log")
	}
	if !strings.Contains(log, "unknown key refused (repeated)") || !strings.Contains(log, "more=") {
		t.Errorf("cls.log does not count the refused logins:\n%s", clip(log))
	}
}

// A user key is not a placeholder: it may not say hello as one, register,
// or answer files.poll / files.pull (through which a user key once pulled
// /etc/shadow from the CLS host).
func TestSSHUserKeyRefusedPlaceholderRole(t *testing.T) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	user := loadSigner(t, h.newKey("user", "alice"))
	m := mustDialMQ(t, s.addr, user)
	if code, err := m.call(1, "hello", map[string]any{"proto": 1, "role": "placeholder"}); err != nil || code != "forbidden" {
		t.Fatalf("hello as a placeholder with a user key: %q %v, want forbidden", code, err)
	}
	m = mustDialMQ(t, s.addr, user)
	if code, err := m.call(1, "hello", map[string]any{"proto": 1}); err != nil || code != "" {
		t.Fatalf("hello: %q %v", code, err)
	}
	for i, op := range []string{"register", "files.poll", "files.pull", "next", "report"} {
		body := map[string]any{"placeholder": 1, "site": "node", "host": "h", "slots": 1}
		if code, err := m.call(2+i, op, body); err != nil || code != "forbidden" {
			t.Fatalf("%s with a user key: %q %v, want forbidden", op, code, err)
		}
	}
}

// A site's placeholder key (mq-site-NAME) registers only as its site, and
// no key as the CLS's own local site.
func TestSSHSiteKeyBoundToSite(t *testing.T) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	grid := loadSigner(t, h.newKey("placeholder", "mq-site-grid"))
	m := mustDialMQ(t, s.addr, grid)
	if code, err := m.call(1, "hello", map[string]any{"proto": 1, "role": "placeholder"}); err != nil || code != "" {
		t.Fatalf("hello: %q %v", code, err)
	}
	for i, site := range []string{"other", "local", "grid"} {
		want := "forbidden"
		if site == "grid" {
			want = ""
		}
		if code, err := m.call(2+i, "register", map[string]any{"site": site, "host": "h", "slots": 1}); err != nil || code != want {
			t.Fatalf("grid's key registering as %s: %q %v, want %q", site, code, err, want)
		}
	}
}

// One placeholder key opening connection after connection, each
// registering past its bound and parking polls, is held to the SSH
// endpoint's bound (a quarter of the CLS's descriptors), its refusals are
// counted rather than logged each, and the owner is served meanwhile:
// mqstat answers and a job runs on a local placeholder. (19,990 such
// connections once took the CLS to its descriptor limit and the owner's
// mqstat failed.)
func TestSSHPlaceholderKeyFloodBounded(t *testing.T) {
	const limit, flood = 400, 150 // the SSH endpoint holds at most limit/4
	h := newHarness(t)
	s := h.startSSHCLS("--local", "1")
	setNofile(t, h.cls.pid(), limit)
	ph := loadSigner(t, h.newKey("placeholder", "flooder"))
	before := logSize(t, h)
	var held []*mqConn
	defer func() {
		for _, m := range held {
			m.c.Close()
		}
	}()
	served := 0
	for range flood {
		m, err := dialMQ(s.addr, ph)
		if err != nil {
			continue
		}
		held = append(held, m)
		if code, err := m.call(1, "hello", map[string]any{"proto": 1, "role": "placeholder"}); err != nil || code != "" {
			continue
		}
		registered, phID := 0, int64(0)
		for i := range 20 {
			code, body, err := m.callBody(10+i, "register", map[string]any{"site": "grid", "host": "h", "slots": 1})
			if err == nil && code == "" {
				registered++
				var r struct{ ID int64 }
				json.Unmarshal(body, &r)
				phID = r.ID
			}
		}
		if registered > 4 {
			t.Fatalf("one connection registered %d placeholders; the bound is 4", registered)
		}
		for i := range 10 { // parked polls beyond the connection's bound are refused
			m.send(100+i, "next", map[string]any{"placeholder": phID, "free": 1, "wait_ms": 60000})
		}
		served++
	}
	if served == 0 || served > limit/4 {
		t.Fatalf("%d of %d connections of one key were served; want 1..%d", served, flood, limit/4)
	}
	h.ok("mqstat")
	id := h.submit("t", "true")
	h.waitState(id, "D", 60*time.Second)
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", h.cls.pid())); err == nil && len(fds) >= limit {
		t.Fatalf("the CLS holds %d descriptors, at its limit %d", len(fds), limit)
	}
	if grew := logSize(t, h) - before; grew > 64<<10 {
		t.Fatalf("the flood grew cls.log by %d bytes; want at most 64 KiB", grew)
	}
}

// A placeholder key that pipelines refused requests (polls past its
// parked one answered busy, admin ops it may not call) leaves a few lines
// with counts in cls.log, not one a request: 100,000 pipelined nexts once
// wrote 99,996 busy warnings, 16.4 MB in 25 s.
func TestSSHRefusedRequestsLogBounded(t *testing.T) {
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	ph := loadSigner(t, h.newKey("placeholder", "mq-site-grid"))
	m := mustDialMQ(t, s.addr, ph)
	if code, err := m.call(1, "hello", map[string]any{"proto": 1, "role": "placeholder"}); err != nil || code != "" {
		t.Fatalf("hello: %q %v", code, err)
	}
	_, body, err := m.callBody(2, "register", map[string]any{"site": "grid", "host": "h", "slots": 1})
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		Placeholder int64 `json:"id"`
	}
	if err := json.Unmarshal(body, &reg); err != nil || reg.Placeholder == 0 {
		t.Fatalf("register: %s %v", body, err)
	}
	before := logSize(t, h)
	const each = 3000
	// Pipelined: written without reading, as the attacker did; a reader
	// drains the replies so the CLS is never stalled writing them.
	var answered atomic.Int64
	go func() {
		for {
			if _, err := m.r.ReadBytes('\n'); err != nil {
				return
			}
			answered.Add(1)
		}
	}()
	for i := range each {
		if err := m.send(10+2*i, "next", map[string]any{"placeholder": reg.Placeholder, "wait_ms": 60000}); err != nil {
			t.Fatal(err)
		}
		if err := m.send(11+2*i, "site.list", map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	// Every request but the one parked poll is answered, refused.
	waitFor(t, 2*time.Minute, func() error {
		if n := answered.Load(); n < 2*each-1 {
			return fmt.Errorf("%d of %d refused requests answered", n, 2*each-1)
		}
		return nil
	})
	h.ok("mqstat")                             // the owner is served meanwhile
	h.stopCLS(syscall.SIGTERM, 30*time.Second) // logs the counts not yet logged
	if grew := logSize(t, h) - before; grew > 32<<10 {
		t.Fatalf("%d refused requests grew cls.log by %d bytes; want at most 32 KiB", 2*each, grew)
	}
	log := readFile(t, filepath.Join(h.home, "cls.log"))
	if !strings.Contains(log, "more=") {
		t.Errorf("cls.log does not count the refused requests:\n%s", clip(log))
	}
}
