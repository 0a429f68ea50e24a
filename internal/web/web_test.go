package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/inspect"
	"github.com/mq-hpc/mq/internal/outstream"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// hostile is peer-supplied text that must never reach a page unescaped.
const hostile = `<script>alert(1)</script>"'&`

type fakeSource struct {
	mu     sync.Mutex
	counts map[string]int
	out    string                 // a job's stdout file
	ext    *protocol.StreamExtent // job 9's stdout, in a stream file
}

func (f *fakeSource) Summary(context.Context) ([]protocol.QueueCounts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := map[string]int{}
	for k, v := range f.counts {
		c[k] = v
	}
	return []protocol.QueueCounts{{Queue: "default", Policy: "fcfs", Counts: c}, {Queue: hostile, Counts: map[string]int{"Q": 1}}}, nil
}

func (f *fakeSource) Moved(context.Context) (*protocol.MovedTotals, error) {
	return &protocol.MovedTotals{Transfers: 2, Bytes: 3000, Seconds: 1.5}, nil
}

func (f *fakeSource) Sites(context.Context) ([]Site, error) {
	return []Site{{Name: "local", Type: "local", State: "ok", Running: 2, Idle: 1, Busy: 1, Slots: 2, SlotsBusy: 1, Min: 2, Max: 2, Paused: 1},
		{Name: "grid", Type: "sge", State: "degraded", Error: hostile, Queued: 3, Broken: "1 broken, their node cannot run jobs (latest: placeholder 7 on n7: stuck)",
			Unreachable: true, HeldLeases: 7, Cut: "unreachable since 12:02:11 UTC, 3 placeholders' 7 jobs held until 12:32:11 UTC"}}, nil
}

func (f *fakeSource) JobsPage(_ context.Context, st protocol.Stat, after int64, limit int) ([]protocol.JobInfo, error) {
	var out []protocol.JobInfo
	for id := after + 1; id <= 250 && len(out) < limit; id++ {
		out = append(out, protocol.JobInfo{ID: id, Queue: "default", Target: hostile, State: "Q", Command: hostile})
	}
	return out, nil
}

func (f *fakeSource) Job(_ context.Context, id int64) (protocol.JobDetail, error) {
	if id == 10 { // handed out ahead, not started yet
		return protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 10, Queue: "default", Target: "t", State: "P", Attempts: 1, Site: "local", Host: "h"},
			Stdout: "/nowhere/0/10.1.out", Stderr: "/nowhere/0/10.1.err"}, nil
	}
	if id == 9 { // a placeholder that streams: stdout in a stream file, stderr empty
		return protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 9, Queue: "default", Target: "t", State: "D", Attempts: 1, Site: "local", Host: "h"},
			Stdout: "/nowhere/0/9.1.out", Stderr: "/nowhere/0/9.1.err", StdoutStream: f.ext}, nil
	}
	if id != 7 {
		return protocol.JobDetail{}, protocol.Errorf(protocol.CodeNotFound, "job %d does not exist", id)
	}
	exit := 0
	return protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 7, Queue: "default", Target: hostile, State: "D", Attempts: 2, Exit: &exit,
		Site: "local", Host: "h", Command: hostile, Prereqs: []string{"pre"}, AfterAny: []string{"work"},
		Accounting: protocol.Accounting{Elapsed: 12.5, Usage: protocol.Usage{CPUUser: 1.25, CPUSys: 0.5, MaxRSS: 3 << 20}}},
		Stdout:    f.out,
		Array:     &protocol.ArrayInfo{First: 5, Last: 9, Spec: "1-5%2", Limit: 2, Queue: "default", Target: hostile, Counts: map[string]int{"D": 3, "F": 2}},
		WaitingOn: []protocol.TargetStatus{{Target: "work", AfterAny: true, Ended: true, Counts: map[string]int{"F": 1}}},
		History:   []protocol.AttemptInfo{{Attempt: 1, Site: "local", Reason: "lost: " + hostile}},
		Transfers: []protocol.TransferInfo{{Path: "in.fa", From: "local", To: "grid", Bytes: 1 << 20, Seconds: 0.5}},
	}, nil
}

func (f *fakeSource) TargetGraph(_ context.Context, name string, limit int) ([]inspect.TargetNode, bool, error) {
	if name == "missing" {
		return nil, false, protocol.Errorf(protocol.CodeNotFound, "target %q does not exist", name)
	}
	return []inspect.TargetNode{{Name: name, Total: 1, Prereqs: []int{1, 2}},
		{Name: "a", Total: 2, Done: 2, Depth: 1}, {Name: hostile, Total: 1, Bad: 1, Depth: 1}}, false, nil
}

type testBundle struct {
	src *fakeSource
	srv *Server
	ts  *httptest.Server
	m   *Metrics
}

func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	out := filepath.Join(t.TempDir(), "7.2.out")
	if err := os.WriteFile(out, []byte("hello from job 7\n"+hostile+"\x1b[31m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &testBundle{src: &fakeSource{counts: map[string]int{"Q": 5, "D": 3}, out: out, ext: streamed(t, 9, "hello from a stream\n"+hostile)}, m: NewMetrics()}
	cfg.Source, cfg.Metrics = b.src, b.m
	b.m.SetSource(b.src)
	if cfg.Interval == 0 {
		cfg.Interval = 20 * time.Millisecond
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	b.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(func() { b.ts.Close(); cancel(); <-done })
	return b
}

// streamed writes text as job id's stdout (attempt 1) to a stream file
// and returns its extent.
func streamed(t testing.TB, id int64, text string) *protocol.StreamExtent {
	t.Helper()
	path := filepath.Join(t.TempDir(), "1-0.mqs")
	w, err := outstream.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	o := w.Output(outstream.Tag{Job: id, Attempt: 1, Stream: outstream.Stdout}, 0)
	if _, err := o.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	ext, err := o.Close()
	if err == nil {
		err = w.Sync()
	}
	if err != nil {
		t.Fatal(err)
	}
	return &protocol.StreamExtent{Path: path, Attempt: 1, Last: ext.Last, Bytes: ext.Bytes}
}

func (b *testBundle) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := b.ts.Client().Get(b.ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestPages(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Loopback: true})
	for _, tc := range []struct {
		path string
		code int
		want []string
	}{
		{"/", 200, []string{`id="total-Q">6<`, `id="total-D">3<`, "Jobs per state", "degraded", `<svg`, "moved 2 files", "1 paused: output disk nearly full or refusing writes",
			"1 broken, their node cannot run jobs (latest: placeholder 7 on n7: stuck)", "unreachable since 12:02:11 UTC, 3 placeholders&#39; 7 jobs held until 12:32:11 UTC"}},
		{"/jobs", 200, []string{`href="./job/1"`, `id="next"`, "after=100"}},
		{"/jobs?after=200", 200, []string{`href="./job/250"`}},
		{"/jobs?state=Z", 400, nil},
		{"/jobs?after=x", 400, nil},
		{"/job/7", 200, []string{"hello from job 7", "lost: ", "1.0 MiB", `href="../target/pre"`, `href="../target/work"`, "after any: ended", `\x1b`, "12.5s", "1.25s user, 0.50s sys", "3.0 MiB",
			"jobs 5-9, array 1-5%2, 5 jobs: 3 D, 2 F (at most 2 executing)"}},
		{"/job/9", 200, []string{"hello from a stream", "no output"}},
		{"/job/8", 404, nil},
		{"/job/abc", 400, nil},
		{"/target/t1", 200, []string{"<svg", "class=\"node complete\"", "class=\"node bad\"", "2/2 done"}},
		{"/target/missing", 404, nil},
		{"/static/app.js", 200, []string{"EventSource"}},
		{"/static/%F9", 404, nil}, // not UTF-8: fs.Sub's ErrInvalid was served as 500
		{"/static/nope.js", 404, nil},
		{"/metrics", 200, []string{"mq_jobs"}},
		{"/nope", 404, nil},
	} {
		code, body := b.get(t, tc.path)
		if code != tc.code {
			t.Errorf("GET %s: %d, want %d: %.200s", tc.path, code, tc.code, body)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: no %q in the page", tc.path, w)
			}
		}
		// /metrics is text/plain (with nosniff): its labels are as given.
		if tc.path != "/metrics" && strings.Contains(body, "<script>alert") {
			t.Errorf("GET %s: peer text reached the page unescaped", tc.path)
		}
	}
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		for _, p := range []string{"/", "/jobs", "/job/7", "/metrics", "/events"} {
			req, _ := http.NewRequest(m, b.ts.URL+p, strings.NewReader("x"))
			resp, err := b.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", m, p, resp.StatusCode)
			}
		}
	}
	// No page offers a form that posts.
	for _, p := range []string{"/", "/jobs", "/job/7", "/target/x"} {
		if _, body := b.get(t, p); strings.Contains(strings.ToLower(body), `method="post"`) {
			t.Errorf("%s has a form that posts", p)
		}
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Token: "s3cret-token"})
	if code, _ := b.get(t, "/"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _ := b.get(t, "/metrics"); code != http.StatusUnauthorized {
		t.Errorf("/metrics with no token: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", b.ts.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	if resp, err := b.ts.Client().Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("wrong token: %v %v", resp.StatusCode, err)
	}
	req.Header.Set("Authorization", "Bearer s3cret-token")
	if resp, err := b.ts.Client().Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("right token: %v %v", resp.StatusCode, err)
	}
	// ?token= sets a cookie and redirects to the page without it.
	c := b.ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(b.ts.URL + "/jobs?token=s3cret-token&state=Q")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || strings.Contains(loc, "token") || !strings.Contains(loc, "state=Q") {
		t.Errorf("?token=: %d to %q", resp.StatusCode, loc)
	}
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie(strings.TrimPrefix(b.ts.URL, "http://")) {
			cookie = ck
		}
	}
	// No Path: the browser scopes it to the directory of the page, the
	// dashboard's root, whatever prefix a proxy serves it under.
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "" {
		t.Fatalf("no HttpOnly, SameSite=Strict cookie without a Path: %v", resp.Cookies())
	}
	if strings.Contains(cookie.Value, "s3cret-token") {
		t.Errorf("the cookie holds the token: %q", cookie.Value)
	}
	next, err := resp.Request.URL.Parse(loc)
	if err != nil || next.Path != "/jobs" {
		t.Fatalf("?token= on /jobs redirects to %q (%v)", loc, err)
	}
	req, _ = http.NewRequest("GET", next.String(), nil)
	req.AddCookie(cookie)
	if resp, err := b.ts.Client().Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("with the cookie: %v %v", resp.StatusCode, err)
	}
}

// A session cookie opens only the server that made it: a page left open
// while the CLS is down keeps sending it to the port, where another user
// may listen; when the CLS is back (the same token, the same port), what
// they received opens nothing.
func TestSessionEndsWithServer(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	first, again := setup(t, Config{Token: token}), setup(t, Config{Token: token})
	value := sessionOf(t, first, token)
	for _, tc := range []struct {
		name string
		b    *testBundle
		want int
	}{{"the server that made it", first, http.StatusOK}, {"another run, same token", again, http.StatusUnauthorized}} {
		req, _ := http.NewRequest("GET", tc.b.ts.URL+"/metrics", nil)
		req.AddCookie(&http.Cookie{Name: sessionCookie(strings.TrimPrefix(tc.b.ts.URL, "http://")), Value: value})
		resp, err := tc.b.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}

// sessionOf opens b's dashboard with token and returns the session
// cookie's value it sets.
func sessionOf(t *testing.T, b *testBundle, token string) string {
	t.Helper()
	c := b.ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(b.ts.URL + "/?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie(strings.TrimPrefix(b.ts.URL, "http://")) {
			return ck.Value
		}
	}
	t.Fatalf("no session cookie: %v", resp.Cookies())
	return ""
}

// TestSessionProbe: /session is what an open page asks when its event
// stream stops (an EventSource cannot see the status it was refused
// with): 204 to its session, 401 once the server that made the session
// is gone (a restarted CLS), so the page can tell a session ended from a
// CLS that is down.
func TestSessionProbe(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	first, again := setup(t, Config{Token: token}), setup(t, Config{Token: token})
	value := sessionOf(t, first, token)
	for _, tc := range []struct {
		name           string
		b              *testBundle
		cookie, bearer string
		want           int
	}{
		{"its session", first, value, "", http.StatusNoContent},
		{"the token", first, "", token, http.StatusNoContent},
		{"a restarted server", again, value, "", http.StatusUnauthorized},
		{"nothing", first, "", "", http.StatusUnauthorized},
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			req, _ := http.NewRequest(method, tc.b.ts.URL+"/session", nil)
			if tc.cookie != "" {
				req.AddCookie(&http.Cookie{Name: sessionCookie(strings.TrimPrefix(tc.b.ts.URL, "http://")), Value: tc.cookie})
			}
			if tc.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			resp, err := tc.b.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want || tc.want == http.StatusNoContent && len(body) > 0 {
				t.Errorf("%s %s: %d %q, want %d", method, tc.name, resp.StatusCode, body, tc.want)
			}
		}
	}
}

// A job that leaves a FIFO where its output was does not hold its page:
// the dashboard opens output as every reader does (outstream.OpenFile)
// and says it cannot read it.
func TestJobPageOutputFIFO(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	fifo := filepath.Join(t.TempDir(), "7.2.out")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	b.src.out = fifo
	type page struct {
		code int
		body string
	}
	got := make(chan page, 1)
	go func() {
		resp, err := b.ts.Client().Get(b.ts.URL + "/job/7")
		if err != nil {
			got <- page{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		got <- page{resp.StatusCode, string(body)}
	}()
	select {
	case p := <-got:
		if p.code != http.StatusOK || !strings.Contains(p.body, "cannot read the output") {
			t.Fatalf("job page: %d, want 200 saying it cannot read the output:\n%s", p.code, p.body)
		}
	case <-time.After(time.Minute):
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close() // lets the waiting open go, so the server can stop
		}
		t.Fatal("the job page still waits after a minute: it opened the FIFO waiting for a writer")
	}
}

func TestLoopbackHost(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Loopback: true})
	req, _ := http.NewRequest("GET", b.ts.URL+"/", nil)
	req.Host = "evil.example:8642"
	resp, err := b.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host evil.example: %d, want 421", resp.StatusCode)
	}
	for _, h := range []string{"localhost:1", "127.0.0.1:8642", "[::1]:80", "LOCALHOST"} {
		if !loopbackHost(h) {
			t.Errorf("%s is loopback", h)
		}
	}
	for _, h := range []string{"10.0.0.1:80", "example.com", "localhost.evil.com"} {
		if loopbackHost(h) {
			t.Errorf("%s is not loopback", h)
		}
	}
}

// TestEvents: the overview's event stream sends updates as counts change.
func TestEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	resp, err := b.ts.Client().Get(b.ts.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	deadline := time.Now().Add(30 * time.Second)
	b.src.mu.Lock()
	b.src.counts["D"] = 41
	b.src.mu.Unlock()
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), `"D":41`) {
			if strings.Contains(sc.Text(), "<script>") {
				t.Error("an update carries peer text unescaped in its plots")
			}
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	t.Fatal("no update with the new count")
}

func TestMetricsParse(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.m.Dispatched(3*time.Millisecond, 2*time.Second)
	b.m.Ended(job.Done)
	b.m.Ended(job.Failed)
	b.m.Committed(time.Millisecond, true)
	_, body := b.get(t, "/metrics")
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	val := func(name string, labels map[string]string) float64 {
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s", name)
		}
	next:
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if w, ok := labels[l.GetName()]; ok && w != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("no %s%v", name, labels)
		return 0
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"mq_jobs", map[string]string{"queue": "default", "state": "Q"}, 5},
		{"mq_jobs", map[string]string{"queue": "default", "state": "D"}, 3},
		{"mq_jobs", map[string]string{"queue": hostile, "state": "Q"}, 1},
		{"mq_dispatched_jobs_total", nil, 1},
		{"mq_attempts_ended_total", map[string]string{"to": "done"}, 1},
		{"mq_attempts_ended_total", map[string]string{"to": "failed"}, 1},
		{"mq_dispatch_latency_seconds", nil, 1},
		{"mq_job_wait_seconds", nil, 1},
		{"mq_commit_seconds", map[string]string{"durable": "true"}, 1},
		{"mq_placeholders", map[string]string{"site": "grid", "state": "queued"}, 3},
		{"mq_placeholders", map[string]string{"site": "local", "state": "idle"}, 1},
		{"mq_site_slots", map[string]string{"site": "local"}, 2},
		{"mq_site_up", map[string]string{"site": "grid", "state": "degraded"}, 1},
		{"mq_site_unreachable", map[string]string{"site": "grid"}, 1},
		{"mq_site_unreachable", map[string]string{"site": "local"}, 0},
		{"mq_site_held_leases", map[string]string{"site": "grid"}, 7},
		{"mq_site_held_leases", map[string]string{"site": "local"}, 0},
		{"mq_transfer_bytes_total", nil, 3000},
	} {
		if got := val(tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	// mq_site_up has a series for each state a site can be in (the site
	// manager's), and none for a state no site ever reports.
	states := map[string]bool{}
	for _, m := range fams["mq_site_up"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "state" {
				states[l.GetValue()] = true
			}
		}
	}
	if want := map[string]bool{"starting": true, "ok": true, "throttled": true, "degraded": true}; !maps.Equal(states, want) {
		t.Errorf("mq_site_up states %v, want %v", slices.Sorted(maps.Keys(states)), slices.Sorted(maps.Keys(want)))
	}
}

func TestFollowHook(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Follow: func(ctx context.Context, id int64, stderr bool) (<-chan []byte, error) {
		ch := make(chan []byte, 2)
		ch <- []byte("line one\npart")
		ch <- []byte(hostile)
		close(ch)
		return ch, nil
	}})
	// A job handed out, started (E) or not yet (P), has its page follow
	// its output; an ended one's does not.
	for id, follows := range map[int]bool{10: true, 7: false} {
		_, page := b.get(t, fmt.Sprintf("/job/%d", id))
		if got := strings.Contains(page, "data-follow="); got != follows {
			t.Errorf("job %d's page follows its output: %v, want %v", id, got, follows)
		}
	}
	code, body := b.get(t, "/job/7/output/events")
	if code != 200 || !strings.Contains(body, `data: "line one\npart"`) || !strings.Contains(body, "event: end\ndata: {\"name\":\"done\",\"state\":\"D\"}\n\n") {
		t.Errorf("%d %q", code, body)
	}
	if strings.Contains(body, "<script>") {
		t.Error("a chunk carries raw peer text")
	}
}

// TestFollowSplitCharacter: output followed on a page whose chunks end
// inside a character shows the character, not the escapes of its bytes.
func TestFollowSplitCharacter(t *testing.T) {
	t.Parallel()
	text := "µm é 日本 🙂\n"
	b := setup(t, Config{Follow: func(ctx context.Context, id int64, stderr bool) (<-chan []byte, error) {
		ch := make(chan []byte, len(text)+2)
		// The stream starts inside a character (0xa5 is left off) and then
		// has a lead byte whose character never comes (shown escaped).
		ch <- []byte{0xa5, 0xe6}
		for i := range len(text) { // a byte a chunk
			ch <- []byte{text[i]}
		}
		ch <- []byte{0xe6, 0x97} // cut short at the end: shown as bytes
		close(ch)
		return ch, nil
	}})
	_, body := b.get(t, "/job/7/output/events")
	var got strings.Builder
	for _, l := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(l, "data: \""); ok {
			var s string
			if err := json.Unmarshal([]byte(`"`+d), &s); err != nil {
				t.Fatalf("chunk %q: %v", l, err)
			}
			got.WriteString(s)
		}
	}
	if want := "\\xe6" + text + `\xe6\x97`; got.String() != want {
		t.Errorf("the page got %q, want %q", got.String(), want)
	}
}

// listingSource is a Source whose per-job reads count: the overview, its
// live updates and /metrics must use aggregates only.
type listingSource struct {
	*fakeSource
	mu    sync.Mutex
	calls []string
}

func (l *listingSource) note(what string) {
	l.mu.Lock()
	l.calls = append(l.calls, what)
	l.mu.Unlock()
}

func (l *listingSource) JobsPage(ctx context.Context, st protocol.Stat, after int64, limit int) ([]protocol.JobInfo, error) {
	l.note("JobsPage")
	return l.fakeSource.JobsPage(ctx, st, after, limit)
}

func (l *listingSource) Job(ctx context.Context, id int64) (protocol.JobDetail, error) {
	l.note("Job")
	return l.fakeSource.Job(ctx, id)
}

func (l *listingSource) TargetGraph(ctx context.Context, name string, limit int) ([]inspect.TargetNode, bool, error) {
	l.note("TargetGraph")
	return l.fakeSource.TargetGraph(ctx, name, limit)
}

// TestRefreshReadsNoJobs: what costs the same at a million jobs as at ten
// (the overview, its updates every interval while a page follows them, and
// /metrics) never lists jobs or reads one; a listing reads one page.
func TestRefreshReadsNoJobs(t *testing.T) {
	t.Parallel()
	src := &listingSource{fakeSource: &fakeSource{counts: map[string]int{"Q": 5, "D": 3}}}
	m := NewMetrics()
	m.SetSource(src)
	srv, err := New(Config{Source: src, Metrics: m, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	ts := httptest.NewServer(srv.Handler())
	defer func() { ts.Close(); cancel(); <-done }()
	get := func(path string) string {
		t.Helper()
		resp, err := ts.Client().Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return string(b)
	}
	get("/")
	// A page following the updates: several samples rendered and sent.
	resp, err := ts.Client().Get(ts.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for n := 0; n < 5 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	resp.Body.Close()
	for range 3 {
		get("/metrics")
	}
	get("/")
	src.mu.Lock()
	calls := slices.Clone(src.calls)
	src.mu.Unlock()
	if len(calls) > 0 {
		t.Errorf("the overview, its updates and /metrics read jobs: %v", calls)
	}
	get("/jobs")
	src.mu.Lock()
	defer src.mu.Unlock()
	if !slices.Equal(src.calls, []string{"JobsPage"}) {
		t.Errorf("a listing page made %v, want one JobsPage", src.calls)
	}
}

// TestQueuePlot: the overview plots the jobs per state of one queue when
// asked (?queue=), live too: its updates carry that queue's plot, not all
// queues'; a page plots all queues by default. At most maxPlotted queues
// are followed at once.
func TestQueuePlot(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	code, body := b.get(t, "/?queue=default")
	if code != 200 || !strings.Contains(body, "Jobs per state in queue default") || !strings.Contains(body, `data-queue="default"`) {
		t.Fatalf("/?queue=default: %d %.300s", code, body)
	}
	if !strings.Contains(body, `<a href="./">all queues</a>`) {
		t.Error("a queue's overview does not link back to all queues")
	}
	if _, body := b.get(t, "/"); !strings.Contains(body, "Jobs per state (all queues)") || !strings.Contains(body, `href="./?queue=default"`) {
		t.Errorf("the overview does not plot all queues, or offer a queue's plot")
	}
	if code, _ := b.get(t, "/?queue="+strings.Repeat("q", 300)); code != 400 {
		t.Errorf("a 300-byte queue name: %d, want 400", code)
	}
	// The queue's counts over time: the hostile queue has 1 job queued, the
	// default 5; the plot's y axis says which was drawn.
	updates := func(q string) string {
		t.Helper()
		resp, err := b.ts.Client().Get(b.ts.URL + "/events?queue=" + url.QueryEscape(q))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var u update
				if err := json.Unmarshal([]byte(d), &u); err != nil {
					t.Fatal(err)
				}
				return string(u.Plots["states"])
			}
		}
		t.Fatalf("no update for queue %q", q)
		return ""
	}
	if p := updates("default"); !strings.Contains(p, "in queue default") || !strings.Contains(p, ">5</text>") || strings.Contains(p, ">10</text>") {
		t.Errorf("queue default's live plot: %.400s", p)
	}
	if p := updates(hostile); !strings.Contains(p, "in queue &lt;script&gt;") || !strings.Contains(p, ">1</text>") || strings.Contains(p, "<script>") {
		t.Errorf("the hostile queue's live plot: %.400s", p)
	}
	if p := updates(""); !strings.Contains(p, "(all queues)") || !strings.Contains(p, ">10</text>") {
		t.Errorf("all queues' live plot (6 queued at most: axis 10): %.400s", p)
	}

	s := &sampler{maxSubs: 64}
	for i := range maxPlotted {
		if _, err := s.subscribe(fmt.Sprint("q", i)); err != nil {
			t.Fatalf("queue %d: %v", i, err)
		}
	}
	if _, err := s.subscribe("q0"); err != nil {
		t.Errorf("a second page of a plotted queue: %v", err)
	}
	if _, err := s.subscribe("one-more"); err != errTooManyQueues {
		t.Errorf("queue %d: %v, want %v", maxPlotted+1, err, errTooManyQueues)
	}
}

// A plot of one point still shows it; a plot of nothing says so.
func TestPlotSVG(t *testing.T) {
	t.Parallel()
	one := seriesOf("w", "#000")
	one.add(time.Unix(100, 0), 2.5)
	if svg := string(plotSVG("t", []series{one})); !strings.Contains(svg, "<circle") {
		t.Errorf("a single point is not drawn: %s", svg)
	}
	if svg := string(plotSVG("t <b>", nil)); !strings.Contains(svg, "no data yet") || strings.Contains(svg, "<b>") {
		t.Errorf("empty plot: %s", svg)
	}
}

// BenchmarkSample: one sample with a full history (900 samples) and a page
// open: what the dashboard costs the CLS each second.
func BenchmarkSample(b *testing.B) {
	src := &fakeSource{counts: map[string]int{"Q": 5, "D": 3}}
	m := NewMetrics()
	s := &sampler{src: src, metrics: m, interval: time.Second, keep: 900, log: slogDiscard(), maxSubs: 2}
	ctx := context.Background()
	for i := 0; i < 900; i++ {
		s.sample(ctx)
	}
	ch, _ := s.subscribe("")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.sample(ctx)
		select {
		case <-ch:
		default:
		}
	}
}

// BenchmarkScrape: one /metrics scrape.
func BenchmarkScrape(b *testing.B) {
	src := &fakeSource{counts: map[string]int{"Q": 5, "D": 3}}
	m := NewMetrics()
	m.SetSource(src)
	srv, err := New(Config{Source: src, Metrics: m})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	req := httptest.NewRequest("GET", "/metrics", nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// namedSource lists one job of each target in names.
type namedSource struct {
	*fakeSource
	names []string
}

func (n namedSource) JobsPage(_ context.Context, st protocol.Stat, after int64, limit int) ([]protocol.JobInfo, error) {
	var out []protocol.JobInfo
	for i, name := range n.names {
		if id := int64(i + 1); id > after && len(out) < limit {
			out = append(out, protocol.JobInfo{ID: id, Queue: "default", Target: name, State: "D", Command: "true"})
		}
	}
	return out, nil
}

// TestTargetLinks follows each target's link on the listing, resolved as
// a browser resolves it (dot segments removed), to the page of that
// target: a name is not a query, fragment, path or escape.
func TestTargetLinks(t *testing.T) {
	t.Parallel()
	names := []string{"plain", "a?b#c", "pct%2e%2e", "%zz", "../jobs", "x/../y", "x/y", "t&x=1", "é", ".", "..", "./a"}
	srv, err := New(Config{Source: namedSource{&fakeSource{}, names}, Log: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := ts.Client().Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, page := get(ts.URL + "/jobs")
	base, _ := url.Parse(ts.URL + "/jobs")
	hrefs := regexp.MustCompile(`<td><a href="([^"]*)">([^<]*)</a></td><td class="st-`).FindAllStringSubmatch(page, -1)
	if len(hrefs) != len(names) {
		t.Fatalf("the listing links %d targets, want %d: %s", len(hrefs), len(names), page)
	}
	for i, m := range hrefs {
		ref, err := url.Parse(html.UnescapeString(m[1]))
		if err != nil {
			t.Errorf("target %q: link %q: %v", names[i], m[1], err)
			continue
		}
		u := base.ResolveReference(ref)
		code, body := get(u.String())
		want := "<h1>Target " + html.EscapeString(names[i]) + "</h1>"
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("target %q links to %s (%s): %d %.300s", names[i], m[1], u, code, body)
		}
	}
}

// manyQueues has n queues of one ended job each, and "zz-busy" with a
// queued job: a CLS where a queue was made per experiment.
type manyQueues struct {
	*fakeSource
	n int
}

func (m manyQueues) Summary(context.Context) ([]protocol.QueueCounts, error) {
	qs := []protocol.QueueCounts{{Queue: "zz-busy", Counts: map[string]int{"Q": 1}}}
	for i := range m.n {
		qs = append(qs, protocol.QueueCounts{Queue: fmt.Sprintf("exp-%05d", i), Policy: "fcfs", Counts: map[string]int{"D": 1}})
	}
	return qs, nil
}

// TestManyQueuesBounded: with thousands of queues the overview, its live
// updates and the history its plots keep show at most maxQueueRows of
// them, those with jobs not ended first, and the others as one row; the
// totals still count every job.
func TestManyQueuesBounded(t *testing.T) {
	t.Parallel()
	const n = 3000
	srv, err := New(Config{Source: manyQueues{&fakeSource{}, n}, Interval: 20 * time.Millisecond, Log: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Run(ctx)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`id="total-D">3000<`, `id="total-Q">1<`, "zz-busy", fmt.Sprintf("%d more queues", n+1-maxQueueRows)} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the overview has no %q", want)
		}
	}
	if len(page) > 64<<10 {
		t.Errorf("the overview of %d queues is %d bytes", n+1, len(page))
	}

	resp, err = ts.Client().Get(ts.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var u update
		if err := json.Unmarshal([]byte(d), &u); err != nil {
			t.Fatal(err)
		}
		if len(d) > 64<<10 || len(u.Queues) != maxQueueRows || u.More == nil || u.More.N != n+1-maxQueueRows ||
			u.More.Counts["D"] != n-maxQueueRows+1 || u.Queues[len(u.Queues)-1].Queue != "zz-busy" {
			t.Errorf("an update of %d bytes: %d queues (the last %q), more %+v", len(d), len(u.Queues), u.Queues[len(u.Queues)-1].Queue, u.More)
		}
		break
	}
	for _, h := range srv.smp.snapshot() {
		if len(h.Queues) > maxQueueRows {
			t.Fatalf("the history keeps %d queues a sample", len(h.Queues))
		}
	}
}

// gatherSource's job 42 needs 5,000 targets, all complete but the last.
type gatherSource struct{ *fakeSource }

func (g gatherSource) Job(ctx context.Context, id int64) (protocol.JobDetail, error) {
	if id != 42 {
		return g.fakeSource.Job(ctx, id)
	}
	d := protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 42, Queue: "default", Target: "gather", State: "W"}}
	for i := range 5000 {
		name := fmt.Sprintf("part%d", i)
		ts := protocol.TargetStatus{Target: name, Complete: true, Counts: map[string]int{"D": 1}}
		if i == 4999 {
			name, ts = "straggler", protocol.TargetStatus{Target: "straggler", Counts: map[string]int{"E": 1}}
		}
		d.Prereqs = append(d.Prereqs, name)
		d.WaitingOn = append(d.WaitingOn, ts)
	}
	return d, nil
}

// TestJobPageManyPrereqs: a gather job's page lists a bounded number of
// its prerequisite targets, those it still waits on first, and says how
// many it left off.
func TestJobPageManyPrereqs(t *testing.T) {
	t.Parallel()
	srv, err := New(Config{Source: gatherSource{&fakeSource{}}, Log: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL + "/job/42")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d: %.300s", resp.StatusCode, page)
	}
	for _, want := range []string{"and 4950 more (mqstat -j 42)", "and 4800 more targets (mqstat -j 42)", `<td><a href="../target/straggler">straggler</a></td><td>false</td>`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page has no %q", want)
		}
	}
	if len(page) > 64<<10 {
		t.Errorf("the page of a job with 5,000 prerequisite targets is %d bytes", len(page))
	}
}

// TestOutputTailWholeCharacters: the end of a long output a job page
// shows starts at a character, not in the middle of one.
func TestOutputTailWholeCharacters(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{OutputTail: 8})
	if err := os.WriteFile(b.src.out, []byte("x日本語日本語"), 0o600); err != nil { // 1 + 6*3 bytes
		t.Fatal(err)
	}
	_, page := b.get(t, "/job/7")
	if !strings.Contains(page, `<pre id="stdout">本語</pre>`) {
		i := strings.Index(page, `<pre id="stdout">`)
		t.Errorf("the tail shows as %.60q", page[max(i, 0):])
	}
}

// summaryCounting counts the summaries asked for.
type summaryCounting struct {
	*listingSource
	summaries atomic.Int32
}

func (s *summaryCounting) Summary(ctx context.Context) ([]protocol.QueueCounts, error) {
	s.summaries.Add(1)
	return s.listingSource.Summary(ctx)
}

// TestListingOfNoJobsReadsNone: a listing of states the core counts no
// job in (in its queue, or in any) is empty without a read of the jobs,
// which would read every one to find none; one of a state with jobs, or
// of a target, reads its page. E lists the prefetched (P) too. Once the
// overview has a sample, a listing of a state it counts jobs in asks for
// no summary (a copy of every queue's counts).
func TestListingOfNoJobsReadsNone(t *testing.T) {
	t.Parallel()
	ssrc := &summaryCounting{listingSource: &listingSource{fakeSource: &fakeSource{counts: map[string]int{"Q": 5, "D": 3, "P": 1}}}}
	srv, err := New(Config{Source: ssrc, Log: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	src := ssrc.listingSource
	for _, tc := range []struct {
		path      string
		reads     bool
		summaries int32
	}{
		{"/jobs?state=F", false, 1},
		{"/jobs?state=FB", false, 1},
		{"/jobs?state=D&queue=nosuch", false, 1},
		{"/jobs?state=Q&queue=default", true, 1},
		{"/jobs?state=E", true, 1},
		{"/jobs?state=F&target=t", true, 0},
		{"/jobs", true, 0},
		{"/jobs?state=fd", true, 1},
		{"sample", false, 0},
		{"/jobs?state=Q&queue=default", true, 0},
		{"/jobs?state=E", true, 0},
		{"/jobs?state=D&queue=nosuch", false, 1},
		{"/jobs?state=F", false, 1},
	} {
		if tc.path == "sample" {
			srv.smp.sample(t.Context())
			continue
		}
		ssrc.summaries.Store(0)
		src.mu.Lock()
		src.calls = nil
		src.mu.Unlock()
		resp, err := ts.Client().Get(ts.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		src.mu.Lock()
		read := slices.Contains(src.calls, "JobsPage")
		src.mu.Unlock()
		if resp.StatusCode != 200 || read != tc.reads {
			t.Errorf("GET %s: %d, read the jobs: %v, want %v", tc.path, resp.StatusCode, read, tc.reads)
		}
		if !tc.reads && !strings.Contains(string(body), "no jobs") {
			t.Errorf("GET %s does not say there are no jobs", tc.path)
		}
		if n := ssrc.summaries.Load(); n != tc.summaries {
			t.Errorf("GET %s asked for %d summaries, want %d", tc.path, n, tc.summaries)
		}
	}
}

// TestMetricsQueuesBounded: with thousands of queues /metrics has per-queue
// series for at most maxQueueRows of them, those with jobs not ended
// first, and one "other queues" series a state summing the rest, so every
// state's sum over queues is still every job; mq_queues counts them all.
func TestMetricsQueuesBounded(t *testing.T) {
	t.Parallel()
	const n = 3000
	src := manyQueues{&fakeSource{counts: map[string]int{}}, n}
	m := NewMetrics()
	m.SetSource(src)
	srv, err := New(Config{Source: src, Metrics: m, Log: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	queues := map[string]bool{}
	sum := map[string]float64{}
	for _, mt := range fams["mq_jobs"].GetMetric() {
		var q, st string
		for _, l := range mt.GetLabel() {
			switch l.GetName() {
			case "queue":
				q = l.GetValue()
			case "state":
				st = l.GetValue()
			}
		}
		queues[q] = true
		sum[st] += mt.GetGauge().GetValue()
	}
	if len(queues) != maxQueueRows+1 || !queues["zz-busy"] || !queues[otherQueues] {
		t.Errorf("mq_jobs has %d queues (zz-busy: %v, %q: %v), want %d and the rest summed", len(queues), queues["zz-busy"], otherQueues, queues[otherQueues], maxQueueRows)
	}
	if sum["D"] != n || sum["Q"] != 1 {
		t.Errorf("mq_jobs sums to %v done and %v queued, want %d and 1", sum["D"], sum["Q"], n)
	}
	if got := fams["mq_queues"].GetMetric(); len(got) != 1 || got[0].GetGauge().GetValue() != n+1 {
		t.Errorf("mq_queues = %v, want %d", got, n+1)
	}
}

// whySource's job 9 waits, saying why as mqstat -j does.
type whySource struct{ *fakeSource }

func (whySource) Job(_ context.Context, id int64) (protocol.JobDetail, error) {
	return protocol.JobDetail{JobInfo: protocol.JobInfo{ID: id, Queue: "q", Target: "t", State: "Q"},
		Unfit:      "expected to take 1h0m0s; the longest a placeholder or site runs a job is 9m30s (site <s>)",
		Infeasible: "no site can end it by the deadline", OverBudget: "the budget left cannot pay for it"}, nil
}

// TestJobPageSaysWhyNotRunning: a queued job's page says why it cannot
// run, as mqstat -j does (cannot run, infeasible, over budget), escaped.
func TestJobPageSaysWhyNotRunning(t *testing.T) {
	t.Parallel()
	srv, err := New(Config{Source: whySource{&fakeSource{}}, Log: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL + "/job/9")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"<dt>cannot run</dt><dd>expected to take 1h0m0s; the longest a placeholder or site runs a job is 9m30s (site &lt;s&gt;)</dd>",
		"<dt>infeasible</dt><dd>no site can end it by the deadline</dd>",
		"<dt>over budget</dt><dd>the budget left cannot pay for it</dd>",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page has no %q", want)
		}
	}
}
