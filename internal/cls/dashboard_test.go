package cls_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/cls"
	"github.com/mq-hpc/mq/protocol"
)

func TestHTTPAddrChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr   string
		public bool
		want   string // "" = starts
	}{
		{"127.0.0.1:0", false, ""},
		{"localhost:0", false, ""},
		{"0.0.0.0:0", false, "not a loopback address"},
		{":0", false, ""}, // loopback by default
		{"[::]:0", false, "not a loopback address"},
		{"nonsense", false, "not HOST:PORT"},
	} {
		c, err := cls.New(context.Background(), cls.Config{Home: shortHome(t), HTTPAddr: tc.addr, HTTPPublic: tc.public})
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.addr, err)
				continue
			}
			if c.HTTPAddr() == nil {
				t.Errorf("%s: no dashboard address", tc.addr)
			}
			c.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.addr, err, tc.want)
			if c != nil {
				c.Close()
			}
		}
	}
}

// A public dashboard makes its token file 0600 once and keeps it; one
// others can read is refused.
func TestHTTPToken(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	c, err := cls.New(context.Background(), cls.Config{Home: home, HTTPAddr: "0.0.0.0:0", HTTPPublic: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	path := filepath.Join(home, cls.TokenFileName)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token %v %v", fi, err)
	}
	tok, _ := os.ReadFile(path)
	os.Chmod(path, 0o644)
	if _, err := cls.New(context.Background(), cls.Config{Home: home, HTTPAddr: "0.0.0.0:0", HTTPPublic: true}); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("a token others can read: %v", err)
	}
	os.Chmod(path, 0o600)
	c = startCLS(t, cls.Config{Home: home, HTTPAddr: "0.0.0.0:0", HTTPPublic: true})
	url := "http://" + c.HTTPAddr().String() + "/metrics"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("with the token: %v %v", resp, err)
	}
	resp.Body.Close()
}

// --log-format json writes one JSON object a line; ReopenLog (SIGHUP)
// writes to a new cls.log after the old one was moved away.
func TestLogJSONAndReopen(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	c := startCLS(t, cls.Config{Home: home, LogFormat: "json"})
	log := filepath.Join(c.Home(), "cls.log")
	if err := os.Rename(log, log+".1"); err != nil {
		t.Fatal(err)
	}
	if err := c.ReopenLog(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{log + ".1", log} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, l := range lines {
			if l == "" {
				continue // the old file may have nothing yet
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil || m["msg"] == nil {
				t.Errorf("%s: %q is not a JSON log line: %v", p, l, err)
			}
		}
		if p == log && !strings.Contains(string(b), "log reopened") {
			t.Errorf("the new log has %q", b)
		}
	}
	if _, err := cls.New(context.Background(), cls.Config{Home: shortHome(t), LogFormat: "xml"}); err == nil {
		t.Error("log format xml accepted")
	}
}

// syncBuffer is a Notes writer the test reads while the CLS writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// On loopback too, nothing of a job shows without the token: other users
// of the machine can connect to a loopback port. The tokenized address
// cls serve prints, and DashboardURL says again, sets a session cookie
// that opens every page.
func TestDashboardLoopbackNeedsToken(t *testing.T) {
	t.Parallel()
	notes := &syncBuffer{}
	c := startCLS(t, cls.Config{Home: shortHome(t), Local: 0, HTTPAddr: "127.0.0.1:0", Notes: notes})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, c.Home(), "", "cls-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const secret = "Authorization-Bearer-canary-51ab"
	sub, err := client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "t", Command: "curl -H " + secret}}})
	if err != nil {
		t.Fatal(err)
	}
	id := sub.IDs[0]
	base := "http://" + c.HTTPAddr().String()
	for _, p := range []string{"/", "/jobs", fmt.Sprintf("/job/%d", id), fmt.Sprintf("/job/%d/output/events", id), "/events", "/metrics", "/target/t"} {
		// A stream served without the token would never end.
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(base + p)
		if err != nil {
			t.Errorf("GET %s without the token: %v", p, err)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", p, resp.StatusCode)
		}
		if strings.Contains(string(body), secret) || strings.Contains(string(body), "mq_jobs") {
			t.Errorf("GET %s without the token shows the job: %.200s", p, body)
		}
	}
	fi, err := os.Stat(filepath.Join(c.Home(), cls.TokenFileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	u, err := cls.DashboardURL(c.Home())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, base+"/?token=") {
		t.Errorf("DashboardURL %q, want %s/?token=...", u, base)
	}
	// Notes that are not a terminal (a file others may read) get the
	// address without the token.
	if want := "dashboard on " + base + "/ (with its token: cls dashboard url)\n"; !strings.Contains(notes.String(), want) || strings.Contains(notes.String(), "token=") {
		t.Errorf("cls serve printed %q; want %q and no token", notes.String(), want)
	}
	log, _ := os.ReadFile(filepath.Join(c.Home(), "cls.log"))
	if !strings.Contains(string(log), base+"/") {
		t.Errorf("cls.log does not say the dashboard's address %s", base)
	}
	if tok, _, _ := strings.Cut(strings.TrimPrefix(u, base+"/?token="), "&"); tok == "" || strings.Contains(string(log), tok) {
		t.Errorf("cls.log holds the dashboard's token (or there is none: %q)", u)
	}
	jar, _ := cookiejar.New(nil)
	var redirected []string
	br := &http.Client{Jar: jar, Timeout: time.Minute, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		redirected = append(redirected, req.URL.String())
		return nil
	}}
	resp, err := br.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(redirected) != 1 || redirected[0] != base+"/" {
		t.Fatalf("the tokenized URL: %d after redirects %v", resp.StatusCode, redirected)
	}
	resp, err = br.Get(fmt.Sprintf("%s/job/%d", base, id))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), secret) {
		t.Errorf("the job's page with the session cookie: %d %.200s", resp.StatusCode, body)
	}
	// Scrapers send the token in a header.
	tok, _ := os.ReadFile(filepath.Join(c.Home(), cls.TokenFileName))
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "mq_jobs") {
		t.Errorf("/metrics with the bearer token: %d", resp.StatusCode)
	}
}

// DashboardURL names no address when no CLS serves the home, or its CLS
// has no dashboard: an address a CLS left behind may be anyone's now.
func TestDashboardURLWithoutDashboard(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	c := startCLS(t, cls.Config{Home: home, Local: 0, HTTPAddr: "127.0.0.1:0"})
	if _, err := cls.DashboardURL(c.Home()); err != nil {
		t.Fatal(err)
	}
	url, _ := os.ReadFile(filepath.Join(c.Home(), cls.URLFileName))
	// A CLS without --http: a stale address file left by a killed one is
	// not believed.
	home2 := shortHome(t)
	c2, err := cls.New(context.Background(), cls.Config{Home: home2, Local: 0})
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	os.WriteFile(filepath.Join(c2.Home(), cls.URLFileName), url, 0o600)
	if _, err := cls.DashboardURL(c2.Home()); err == nil || !strings.Contains(err.Error(), "no CLS is serving") {
		t.Errorf("no CLS, a stale address: %v", err)
	}
	c3 := startCLS(t, cls.Config{Home: home2, Local: 0})
	if _, err := cls.DashboardURL(c3.Home()); err == nil || !strings.Contains(err.Error(), "has no dashboard") {
		t.Errorf("a CLS without a dashboard, a stale address: %v", err)
	}
	// A MQ_HOME that does not exist (mistyped) says so, not lstat's words.
	missing := filepath.Join(t.TempDir(), "nothere")
	if _, err := cls.DashboardURL(missing); err == nil || !strings.Contains(err.Error(), "no CLS is serving "+missing+": it does not exist") {
		t.Errorf("a MQ_HOME that does not exist: %v", err)
	}
}

// Once the socket of a starting CLS accepts, cls dashboard url finds the
// address: the socket is opened last. (It was opened before the dashboard,
// and cls dashboard url run right after cls serve --http & could say the
// CLS has no dashboard.) The start is watched as a script would, dialling
// the socket again and again; each round starts a CLS anew.
func TestDashboardURLOnceSocketAnswers(t *testing.T) {
	t.Parallel()
	for round := range 5 {
		home := shortHome(t)
		sock := filepath.Join(home, "cls.sock")
		type result struct {
			c   *cls.CLS
			err error
		}
		started := make(chan result, 1)
		go func() {
			c, err := cls.New(context.Background(), cls.Config{Home: home, Local: 0, HTTPAddr: "127.0.0.1:0"})
			started <- result{c, err}
		}()
		var urlErr error
		var r *result
		for r == nil {
			select {
			case x := <-started:
				r = &x
			default:
			}
			if conn, err := net.Dial("unix", sock); err == nil {
				conn.Close()
				if _, err := cls.DashboardURL(home); err != nil && urlErr == nil {
					urlErr = err
				}
			}
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.c.Close()
		if urlErr != nil {
			t.Fatalf("round %d: the socket accepts, and: %v", round, urlErr)
		}
	}
}

// The dashboard holds at most HTTPConns connections however many are
// opened: a flood of silent connections costs the CLS that many
// descriptors, not one each.
func TestDashboardConnectionCap(t *testing.T) {
	// Not parallel: it counts this process's descriptors.
	const max, flood = 8, 24
	c := startCLS(t, cls.Config{Home: shortHome(t), Local: 0, HTTPAddr: "127.0.0.1:0", HTTPConns: max})
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		return len(ents)
	}
	before := fds()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range flood {
		conn, err := net.Dial("tcp", c.HTTPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	// Give the server every chance to take more than it should: the
	// owner's requests go through meanwhile.
	u, err := cls.DashboardURL(c.Home())
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	br := &http.Client{Jar: jar, Timeout: time.Minute}
	for range 3 {
		resp, err := br.Get(u)
		if err != nil {
			t.Fatalf("the owner during the flood: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("the owner during the flood: %d", resp.StatusCode)
		}
	}
	br.CloseIdleConnections()
	// The client's ends are flood; the server's at most max (one of them
	// the owner's), and a few descriptors the runtime may open.
	if n := fds() - before; n > flood+max+4 {
		t.Errorf("%d silent connections cost %d descriptors, want at most %d", flood, n, flood+max+4)
	}
}

// A dashboard served under a path (cls serve --http-path, for a proxy that
// passes its prefix on) is there only, and the address cls serve prints
// and DashboardURL says carries the path; a path it could not serve
// under is refused at the start.
func TestDashboardPath(t *testing.T) {
	t.Parallel()
	if _, err := cls.New(context.Background(), cls.Config{Home: shortHome(t), HTTPAddr: "127.0.0.1:0", HTTPPath: "/a/../b/"}); err == nil || !strings.Contains(err.Error(), "--http-path") {
		t.Errorf("--http-path /a/../b/: %v", err)
	}
	if _, err := cls.New(context.Background(), cls.Config{Home: shortHome(t), HTTPPath: "/a/"}); err == nil {
		t.Error("--http-path without --http: no error")
	}
	c := startCLS(t, cls.Config{Home: shortHome(t), Local: 0, HTTPAddr: "127.0.0.1:0", HTTPPath: "/node/c1/8642/"})
	base := "http://" + c.HTTPAddr().String()
	u, err := cls.DashboardURL(c.Home())
	if err != nil || !strings.HasPrefix(u, base+"/node/c1/8642/?token=") {
		t.Fatalf("DashboardURL %q (%v), want %s/node/c1/8642/?token=...", u, err, base)
	}
	jar, _ := cookiejar.New(nil)
	br := &http.Client{Jar: jar, Timeout: time.Minute}
	resp, err := br.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.String() != base+"/node/c1/8642/" {
		t.Fatalf("the tokenized URL: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	for p, want := range map[string]int{"/node/c1/8642/jobs": 200, "/jobs": 404, "/": 404} {
		resp, err := br.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", p, resp.StatusCode, want)
		}
	}
}

// The dashboard's listing of executing jobs (from the jobs the core runs
// now) lists the running job, in its queue only, and none once it ended.
func TestDashboardRunningListing(t *testing.T) {
	t.Parallel()
	c := startCLS(t, cls.Config{Version: "test", HTTPAddr: "127.0.0.1:0"})
	gate := filepath.Join(t.TempDir(), "go")
	id := submit(t, c, fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done", gate))
	queued := submit(t, c, "true")
	startAgent(t, c, localAgent)
	tok, err := os.ReadFile(filepath.Join(c.Home(), cls.TokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + c.HTTPAddr().String()
	page := func(p string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", base+p, nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %.200s", p, resp.StatusCode, b)
		}
		return string(b)
	}
	link := func(id int64) string { return fmt.Sprintf(`href="./job/%d"`, id) }
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(page("/jobs?state=E"), link(id)) {
		if time.Now().After(deadline) {
			t.Fatalf("job %d is not listed executing: %s", id, page("/jobs?state=E"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p := page("/jobs?state=E"); strings.Contains(p, link(queued)) {
		t.Errorf("the queued job %d is listed executing", queued)
	}
	if p := page("/jobs?state=E&queue=nosuch"); strings.Contains(p, link(id)) || !strings.Contains(p, "no jobs") {
		t.Errorf("job %d is listed in a queue it is not in", id)
	}
	if p := page(fmt.Sprintf("/jobs?state=E&after=%d", id)); strings.Contains(p, link(id)) {
		t.Errorf("job %d is listed after itself", id)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for strings.Contains(page("/jobs?state=E"), link(id)) {
		if time.Now().After(deadline) {
			t.Fatalf("job %d is still listed executing after its gate opened", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
