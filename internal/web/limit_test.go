package web

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

const testToken = "s3cret-token-for-tests"

// Without the token nothing of a job shows, whatever the route; a forged
// or foreign session cookie is no better.
func TestTokenRequired(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Token: testToken, Loopback: true, Follow: func(ctx context.Context, id int64, stderr bool) (<-chan []byte, error) {
		ch := make(chan []byte, 1)
		ch <- []byte("secret output")
		close(ch)
		return ch, nil
	}})
	host := strings.TrimPrefix(b.ts.URL, "http://")
	other := &Server{cfg: Config{Token: "another-token-entirely"}}
	for _, cookie := range []string{"", testToken, "00112233445566778899aabbccddeeff.00", other.newSession()} {
		for _, p := range []string{"/", "/jobs", "/job/7", "/job/7/output/events", "/events", "/metrics", "/target/t1", "/?token=wrong"} {
			req, _ := http.NewRequest("GET", b.ts.URL+p, nil)
			if cookie != "" {
				req.AddCookie(&http.Cookie{Name: sessionCookie(host), Value: cookie})
			}
			resp, err := b.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(resp)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s (cookie %.10q): %d, want 401", p, cookie, resp.StatusCode)
			}
			for _, leak := range []string{"hello from job 7", "secret output", "mq_jobs", "default", "<script>"} {
				if strings.Contains(body, leak) {
					t.Errorf("GET %s without the token shows %q", p, leak)
				}
			}
		}
	}
	// The session cookie a tokenized URL sets opens every page.
	c := b.ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(b.ts.URL + "/?token=" + testToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./" {
		t.Fatalf("tokenized URL: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Only to a path of this server's.
	for _, p := range []string{"//evil.example/x", "///evil.example", "/%2F%2Fevil.example/x", "/%2f/evil.example"} {
		req, _ := http.NewRequest("GET", b.ts.URL+"/", nil)
		req.URL.Opaque = p // sent as is
		req.URL.RawQuery = "token=" + testToken
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(loc, "//") {
			t.Errorf("GET %s?token= redirects to %q", p, loc)
		}
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie(host) {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "" {
		t.Fatalf("tokenized URL set %v", resp.Cookies())
	}
	for _, p := range []string{"/", "/job/7", "/job/7/output/events", "/metrics"} {
		req, _ := http.NewRequest("GET", b.ts.URL+p, nil)
		req.AddCookie(session)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(resp); resp.StatusCode != 200 {
			t.Errorf("GET %s with the session: %d %.100s", p, resp.StatusCode, body)
		}
	}
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// One client cannot take every event stream: past its own bound it is
// refused while another client still gets one; a stream given back is
// free again.
func TestStreamsPerClient(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	b := setup(t, Config{Token: testToken, MaxStreams: 5, MaxClientStreams: 2, Follow: func(ctx context.Context, id int64, stderr bool) (<-chan []byte, error) {
		ch := make(chan []byte)
		go func() {
			select {
			case <-block:
			case <-ctx.Done():
			}
			close(ch)
		}()
		return ch, nil
	}})
	t.Cleanup(func() { close(block) })
	open := func(p string, auth func(*http.Request)) (int, func()) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", b.ts.URL+p, nil)
		auth(req)
		resp, err := b.ts.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
			cancel()
			return resp.StatusCode, func() {}
		}
		return 200, func() { cancel(); resp.Body.Close() }
	}
	bearer := func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+testToken) }
	sessions := make([]*http.Cookie, 3)
	for i := range sessions {
		sessions[i] = &http.Cookie{Name: sessionCookie(strings.TrimPrefix(b.ts.URL, "http://")), Value: b.srv.newSession()}
	}
	withSession := func(i int) func(*http.Request) { return func(req *http.Request) { req.AddCookie(sessions[i]) } }

	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for _, p := range []string{"/events", "/job/7/output/events"} {
		code, c := open(p, withSession(0))
		closers = append(closers, c)
		if code != 200 {
			t.Fatalf("session 0's stream %s: %d", p, code)
		}
	}
	for _, p := range []string{"/events", "/job/7/output/events"} {
		if code, _ := open(p, withSession(0)); code != http.StatusTooManyRequests {
			t.Errorf("session 0's third stream (%s): %d, want 429", p, code)
		}
	}
	// Others are served meanwhile, up to the bound of all.
	for i, auth := range []func(*http.Request){withSession(1), bearer, withSession(2)} {
		code, c := open("/events", auth)
		closers = append(closers, c)
		if code != 200 {
			t.Errorf("client %d beside a full one: %d", i, code)
		}
	}
	if code, _ := open("/events", withSession(1)); code != http.StatusTooManyRequests {
		t.Errorf("a stream past the bound of all: %d, want 429", code)
	}
	// Session 0 gives one back and may open one again.
	closers[0]()
	waitUntil(t, func() error {
		code, c := open("/events", withSession(0))
		closers = append(closers, c)
		if code != 200 {
			return fmt.Errorf("session 0 after closing a stream: %d", code)
		}
		return nil
	})
}

func waitUntil(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The listener holds at most max connections: a flood of silent ones
// never takes more, and a client with the token is still served (the
// oldest untrusted connection past its grace makes room).
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Token: testToken})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const max = 8
	ln := LimitListener(raw, max).(*limitListener)
	ln.grace = 200 * time.Millisecond
	srv := b.srv.HTTPServer()
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	open := func() int {
		ln.mu.Lock()
		defer ln.mu.Unlock()
		return len(ln.conns)
	}
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 5 * max {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
		if n := open(); n > max {
			t.Fatalf("%d connections held, the bound is %d", n, max)
		}
	}
	// The owner gets in, and keeps the connection.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	for i := range 3 {
		req, _ := http.NewRequest("GET", "http://"+raw.Addr().String()+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("request %d during the flood: %v", i, err)
		}
		if body := readAll(resp); resp.StatusCode != 200 {
			t.Fatalf("request %d during the flood: %d %.100s", i, resp.StatusCode, body)
		}
		if n := open(); n > max {
			t.Fatalf("%d connections held, the bound is %d", n, max)
		}
	}
	// A request without the token is answered and its connection closed.
	resp, err := http.Get("http://" + raw.Addr().String() + "/")
	if err == nil {
		readAll(resp)
		if resp.StatusCode != 401 || !resp.Close {
			t.Errorf("no token: %d, close %v", resp.StatusCode, resp.Close)
		}
	}
}

// At the bound, a connection that has sent bytes the server has not read
// yet (the owner's request that waited in the backlog behind a flood) is
// not closed at the silent grace; a silent one is.
func TestConnectionGraceBySpeech(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		speaks bool
		closed bool
	}{
		{"silent", false, true},
		{"spoke", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := LimitListener(raw, 1).(*limitListener)
			ln.grace, ln.talkGrace = 50*time.Millisecond, time.Hour
			defer ln.Close()
			first, err := net.Dial("tcp", raw.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			if tc.speaks {
				if _, err := first.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
					t.Fatal(err)
				}
			}
			held, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			if tc.speaks {
				// The bytes are in the kernel before the listener looks.
				deadline := time.Now().Add(time.Minute)
				for !unread(held.(*limitedConn).Conn) {
					if time.Now().After(deadline) {
						t.Fatal("the first connection's bytes never arrived")
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			second, err := net.Dial("tcp", raw.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				if c, err := ln.Accept(); err == nil {
					accepted <- c
				}
			}()
			if tc.closed {
				select {
				case c := <-accepted:
					c.Close()
				case <-time.After(time.Minute):
					t.Fatal("the silent connection was never closed to make room")
				}
				return
			}
			// The speaking connection keeps its place: the listener is
			// waiting on its hour-long grace, not on the 50 ms one.
			deadline := time.Now().Add(time.Minute)
			for {
				ln.mu.Lock()
				waiting := ln.freed != nil
				ln.mu.Unlock()
				if waiting {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the second Accept never waited")
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // four silent graces
			select {
			case c := <-accepted:
				c.Close()
				t.Fatal("the connection that spoke was closed at the silent grace")
			default:
			}
		})
	}
}
