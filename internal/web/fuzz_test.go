package web

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzRequest: whoever reaches the dashboard's port chooses the request
// line, so its path and query parameters (?queue=, ?state=, ?after=,
// ?name=, ?next=, ?token=, ?stream=) are fuzzed. Whatever they hold, the
// handler does not panic or fail to render (500), serves a page (200)
// only to a request with the token, and redirects only within the
// dashboard: a Location resolved as a browser would stays on its host,
// under its path.
func FuzzRequest(f *testing.F) {
	const token = "s3cret-token"
	out := filepath.Join(f.TempDir(), "7.2.out")
	if err := os.WriteFile(out, []byte("hello from job 7\n"+hostile+"\x1b[31m\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	src := &fakeSource{counts: map[string]int{"Q": 5, "D": 3}, out: out, ext: streamed(f, 9, "hello from a stream\n"+hostile)}
	follow := func(ctx context.Context, id int64, stderr bool) (<-chan []byte, error) {
		ch := make(chan []byte, 1)
		ch <- []byte("line\n")
		close(ch)
		return ch, nil
	}
	m := NewMetrics()
	m.SetSource(src)
	var handlers [2]http.Handler
	for i, p := range []string{"", "/node/c1/8642/"} {
		srv, err := New(Config{Source: src, Metrics: m, Token: token, Loopback: true, Path: p, Follow: follow})
		if err != nil {
			f.Fatal(err)
		}
		handlers[i] = srv.Handler()
	}
	for _, s := range []string{
		"/", "/?queue=default", "/jobs?state=QW&queue=default&target=t&after=100", "/jobs?state=Z", "/jobs?after=-1",
		"/job/7", "/job/10", "/job/x", "/job/7/output/events?stream=stderr", "/target/a%2Fb", "/target/?name=..",
		"/events?queue=default", "/static/style.css", "/metrics", "/jobs?token=" + token + "&state=Q",
		"/job/7?token=" + token, "/?token=" + token + "&next=job%2F7%3Fx%3D1", "/?token=" + token + "&next=%2F%2Fevil.example",
		"/?token=" + token + "&next=..%2Fx", "/?token=" + token + "&next=" + url.QueryEscape(`\\evil.example/x`), "//evil.example/jobs",
	} {
		f.Add(s, true, false, "localhost:8642")
		f.Add(s, false, true, "127.0.0.1:8642")
		f.Add(s, true, true, "evil.example")
	}
	f.Fuzz(func(t *testing.T, target string, bearer, prefixed bool, host string) {
		h, prefix := handlers[0], "/"
		if prefixed {
			h, prefix = handlers[1], "/node/c1/8642/"
			target = strings.TrimSuffix(prefix, "/") + target
		}
		// The request as the server would read it off the wire.
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n")))
		if err != nil {
			return
		}
		r.RemoteAddr = "127.0.0.1:40000"
		if bearer {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // the event streams end with it
		defer cancel()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r.WithContext(ctx))
		switch code := w.Code; {
		case code == http.StatusInternalServerError:
			t.Fatalf("GET %q: 500 %q", target, w.Body.String())
		case code == http.StatusOK && !bearer:
			t.Fatalf("GET %q: 200 without the token", target)
		case code/100 == 3:
			loc := w.Header().Get("Location")
			// Browsers read a backslash in a path as a slash.
			ref, err := url.Parse(strings.ReplaceAll(loc, `\`, "/"))
			if err != nil {
				t.Fatalf("GET %q: redirect to %q (%v)", target, loc, err)
			}
			base := *r.URL // the path, as the browser asked for it
			base.Scheme, base.Host = "", ""
			to := base.ResolveReference(ref)
			if to.Scheme != "" || to.Host != "" || !strings.HasPrefix(to.Path, prefix) {
				t.Fatalf("GET %q: redirect to %q leaves the dashboard (%s)", target, loc, to)
			}
		}
	})
}
