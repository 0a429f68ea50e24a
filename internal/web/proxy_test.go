package web

import (
	"context"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// crawlSource lists only the jobs fakeSource has pages for, so every
// link of a listing leads to a page.
type crawlSource struct{ *fakeSource }

func (c crawlSource) JobsPage(_ context.Context, st protocol.Stat, after int64, limit int) ([]protocol.JobInfo, error) {
	var out []protocol.JobInfo
	for _, id := range []int64{7, 9, 10} {
		if id > after && len(out) < limit {
			out = append(out, protocol.JobInfo{ID: id, Queue: "default", Target: hostile, State: "Q", Command: hostile})
		}
	}
	return out, nil
}

// proxied is a dashboard behind a reverse proxy that serves it under
// prefix, stripping it, as jupyter-server-proxy (/proxy/PORT/) and Open
// OnDemand (/rnode/HOST/PORT/) do, passing the browser's Host on; beside
// it on the same origin, another application at /other/ records the
// cookies it is sent. keepHost passes the browser's Host on; without
// strip the proxy passes the prefix on too (Open OnDemand's /node/), and
// the dashboard is told it (Config.Path). Clients reach the origin as http://hub.example.
type proxied struct {
	front   *httptest.Server
	mu      sync.Mutex
	leaked  []string // cookies /other/ was sent
	backend *httptest.Server
}

const proxyToken = "proxy-test-token-0123456789"

func newProxied(t *testing.T, prefix string, keepHost, strip bool) *proxied {
	t.Helper()
	b := &fakeSource{counts: map[string]int{"Q": 5, "D": 3}}
	follow := func(ctx context.Context, id int64, stderr bool) (<-chan []byte, error) {
		ch := make(chan []byte, 1)
		ch <- []byte("followed")
		close(ch)
		return ch, nil
	}
	m := NewMetrics()
	m.SetSource(b)
	cfg := Config{Source: crawlSource{b}, Metrics: m, Token: proxyToken, Loopback: true, Follow: follow, Interval: 20 * time.Millisecond, Log: slogDiscard()}
	if !strip {
		cfg.Path = prefix
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	p := &proxied{backend: httptest.NewServer(srv.Handler())}
	target, _ := url.Parse(p.backend.URL)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target) // the backend's Host, as nginx sends
		if keepHost {
			pr.Out.Host = pr.In.Host // the browser's, as jupyter-server-proxy does
		}
	}, FlushInterval: -1}
	mux := http.NewServeMux()
	if strip {
		mux.Handle(prefix, http.StripPrefix(strings.TrimSuffix(prefix, "/"), rp))
	} else {
		mux.Handle(prefix, rp)
	}
	mux.HandleFunc("/other/", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		for _, c := range r.Cookies() {
			p.leaked = append(p.leaked, c.Name)
		}
		p.mu.Unlock()
		io.WriteString(w, "another application")
	})
	p.front = httptest.NewServer(mux)
	t.Cleanup(func() { p.front.Close(); p.backend.Close(); cancel(); <-done })
	return p
}

// client is a browser of the proxy's origin: a cookie jar, following
// redirects, and hub.example dialled at the proxy.
// noLeak fails t if the origin's other application (/other/) was sent
// a cookie of the dashboard's.
func (p *proxied) noLeak(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.leaked) > 0 {
		t.Errorf("the origin's other application was sent %v", p.leaked)
	}
}

func (p *proxied) client(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := p.front.Listener.Addr().String()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Jar: jar, Transport: tr, Timeout: 30 * time.Second}
}

// refs finds a page's references: links, forms, scripts, styles, the
// followed output streams, and what its script builds from data-root.
var refs = regexp.MustCompile(`(?:href|src|action|data-follow)="([^"]*)"`)

// TestBehindPrefixProxy follows every reference of every page of a
// dashboard a proxy serves under a path prefix: each leads to a page of
// the dashboard (never out of the prefix), the token and its session work
// there, and the session cookie is not sent to the origin's other paths.
func TestBehindPrefixProxy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix          string
		keepHost, strip bool
	}{{"/rnode/c001.cluster/8642/", false, true}, {"/proxy/8642/", true, true}, {"/node/c001.cluster/8642/", false, false}} {
		prefix := tc.prefix
		p := newProxied(t, prefix, tc.keepHost, tc.strip)
		c := p.client(t)
		base := "http://hub.example" + prefix
		get := func(u string) (*http.Response, string) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", u, err)
			}
			defer resp.Body.Close()
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				return resp, "" // a stream: its answer is enough
			}
			b, _ := io.ReadAll(resp.Body)
			return resp, string(b)
		}
		// Without the token, nothing (421 to a Host not loopback).
		if resp, _ := get(base); resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusMisdirectedRequest {
			t.Fatalf("%s without the token: %d", base, resp.StatusCode)
		}
		resp, _ := get(base + "?token=" + proxyToken)
		if resp.StatusCode != 200 || resp.Request.URL.String() != base {
			t.Fatalf("the tokenized address ends at %s (%d), want %s", resp.Request.URL, resp.StatusCode, base)
		}
		seen := map[string]bool{base: true}
		queue := []string{base}
		for len(queue) > 0 && len(seen) < 400 {
			u := queue[0]
			queue = queue[1:]
			resp, body := get(u)
			if resp.StatusCode != 200 {
				t.Errorf("GET %s: %d %.200s", u, resp.StatusCode, body)
				continue
			}
			if got := resp.Request.URL.String(); !strings.HasPrefix(got, base) {
				t.Errorf("GET %s ended at %s, out of %s", u, got, prefix)
			}
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				continue
			}
			page := resp.Request.URL
			var found []string
			for _, m := range refs.FindAllStringSubmatch(body, -1) {
				found = append(found, html.UnescapeString(m[1]))
			}
			// What app.js makes of data-root: the event stream, the
			// queues' listings.
			if m := regexp.MustCompile(`data-root="([^"]*)"`).FindStringSubmatch(body); m != nil && strings.Contains(body, `id="counts"`) {
				found = append(found, m[1]+"events", m[1]+"jobs?queue=default&state=Q")
			}
			// The header's form, as the browser submits it.
			if m := regexp.MustCompile(`<form action="([^"]*)"`).FindStringSubmatch(body); m != nil {
				found = append(found, html.UnescapeString(m[1])+"?target=t1&state=Q")
			}
			for _, f := range found {
				if strings.HasPrefix(f, "http://www.w3.org/") {
					continue // the SVG namespace
				}
				ref, err := url.Parse(f)
				if err != nil {
					t.Errorf("%s: reference %q: %v", u, f, err)
					continue
				}
				next := page.ResolveReference(ref)
				next.Fragment = ""
				if !strings.HasPrefix(next.String(), base) {
					t.Errorf("%s links to %q: %s, out of %s", u, f, next, prefix)
					continue
				}
				if !seen[next.String()] {
					seen[next.String()] = true
					queue = append(queue, next.String())
				}
			}
		}
		for _, must := range []string{"jobs", "job/7", "job/10", "static/app.js", "static/style.css", "metrics", "events", "job/10/output/events?stream=stdout"} {
			if !seen[base+must] {
				t.Errorf("no page links to %s%s", base, must)
			}
		}
		// The mux's own redirects stay under the prefix.
		if resp, _ := get(base + "target"); resp.Request.URL.String() != base+"target/" {
			t.Errorf("%starget: redirected to %s", base, resp.Request.URL)
		}
		// The prefix without its slash leads to the dashboard.
		if resp, _ := get(strings.TrimSuffix(base, "/")); !tc.strip && (resp.StatusCode != 200 || resp.Request.URL.String() != base) {
			t.Errorf("%s: %d at %s", strings.TrimSuffix(base, "/"), resp.StatusCode, resp.Request.URL)
		}
		// Another application on the same origin gets no session cookie.
		if resp, _ := get("http://hub.example/other/x"); resp.StatusCode != 200 {
			t.Fatalf("/other/: %d", resp.StatusCode)
		}
		p.noLeak(t)
	}
}

// TestTokenOnADeepPage: a tokenized address of a page below the root
// (a job's) ends at that page, without the token, with a session for the
// whole dashboard, behind a prefix proxy as without one.
func TestTokenOnADeepPage(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"/", "/proxy/8642/"} {
		p := newProxied(t, prefix, false, true)
		base := "http://hub.example" + prefix
		c := p.client(t)
		resp, err := c.Get(base + "job/7?token=" + proxyToken + "&x=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Request.URL.String() != base+"job/7?x=1" {
			t.Fatalf("%sjob/7?token=: ends at %s (%d)", base, resp.Request.URL, resp.StatusCode)
		}
		for _, u := range []string{base, base + "jobs", base + "target/t1"} {
			resp, err := c.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s with the session: %d", u, resp.StatusCode)
			}
		}
		if prefix == "/" {
			continue
		}
		if resp, err := c.Get("http://hub.example/other/"); err == nil {
			resp.Body.Close()
		}
		p.noLeak(t)
	}
}

// TestPath: a dashboard told its path serves there only, and says it
// refuses a path it could not serve under.
func TestPath(t *testing.T) {
	t.Parallel()
	srv, err := New(Config{Source: &fakeSource{counts: map[string]int{}}, Path: "/node/c1/8642/", Log: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	c := ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tc := range []struct {
		path string
		code int
		loc  string
	}{
		{"/node/c1/8642/", 200, ""},
		{"/node/c1/8642/jobs", 200, ""},
		{"/node/c1/8642", http.StatusSeeOther, "/node/c1/8642/"},
		{"/", 404, ""},
		{"/jobs", 404, ""},
		{"/node/c1/86420/", 404, ""},
		{"/node/c1/8642/target", http.StatusTemporaryRedirect, "./target/"},
		// An escaped slash is no directory to a browser: links and
		// redirects relative to it led out of the prefix (./%252F from
		// /node/c1/8642%2F is /node/c1/%252F).
		{"/node/c1/8642%2F", 404, ""},
		{"/node/c1/8642%2Fjobs", 404, ""},
		{"/node/c1/8642/job%2F7", 404, ""},
	} {
		resp, err := c.Get(ts.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("Location") != tc.loc {
			t.Errorf("GET %s: %d to %q, want %d to %q", tc.path, resp.StatusCode, resp.Header.Get("Location"), tc.code, tc.loc)
		}
	}
	for _, p := range []string{"node/", "/node", "/a/../b/", "/a//b/", "/a b/", "/a?b/", "/a%2f/", "//x/"} {
		if _, err := New(Config{Source: &fakeSource{}, Path: p}); err == nil {
			t.Errorf("Path %q: no error", p)
		}
	}
}

// TestSecureCookieBehindTLS: the session cookie is Secure when the
// browser reached the proxy over TLS (X-Forwarded-Proto: https), so it is
// never sent in plain HTTP; over plain HTTP it cannot be.
func TestSecureCookieBehindTLS(t *testing.T) {
	t.Parallel()
	srv, err := New(Config{Source: &fakeSource{counts: map[string]int{}}, Token: proxyToken, Log: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	c := ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for proto, want := range map[string]bool{"https": true, "": false, "http": false} {
		req, _ := http.NewRequest("GET", ts.URL+"/?token="+proxyToken, nil)
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if cs := resp.Cookies(); len(cs) != 1 || cs[0].Secure != want {
			t.Errorf("X-Forwarded-Proto %q: cookies %v, want one, Secure %v", proto, cs, want)
		}
	}
}

// TestTokenNext: the page a session goes on to is one of the dashboard's,
// whatever a crafted next says.
func TestTokenNext(t *testing.T) {
	for _, tc := range []struct{ next, want string }{
		{"job/7?x=1", "job/7?x=1"},
		{"target/a:b", "target/a:b"},
		{"a:b", ""},
		{"//evil.example/x", ""},
		{"/jobs", ""},
		{"http://evil.example/", ""},
		{"javascript:alert(1)", ""},
		{"../../other/", ""},
		{"jobs/../../x", ""},
	} {
		if got := relativePath(tc.next); got != tc.want {
			t.Errorf("next %q: %q, want %q", tc.next, got, tc.want)
		}
	}
}
