//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// dashboardAddr waits for `cls serve --http` to say where it listens,
// and reads the token every request needs from MQ_HOME/http.token (to
// stderr that is not a terminal the CLS prints no token).
func (h *harness) dashboardAddr() (addr, token string) {
	h.t.Helper()
	re := regexp.MustCompile(`dashboard on http://([^/\s]+)/ \(with its token: cls dashboard url\)\n`)
	waitFor(h.t, 20*time.Second, func() error {
		if m := re.FindStringSubmatch(h.cls.stderr.String()); m != nil {
			addr = m[1]
			return nil
		}
		return fmt.Errorf("cls has not said where its dashboard is: %q", h.cls.stderr.String())
	})
	b, err := os.ReadFile(filepath.Join(h.home, "http.token"))
	if err != nil {
		h.t.Fatal(err)
	}
	return addr, strings.TrimSpace(string(b))
}

func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium (scripts/setup.sh installs Debian's chromium): the dashboard's browser test cannot run")
	return ""
}

// TestDashboardInBrowser runs a workflow on a CLS serving its dashboard and
// watches it in headless Chromium: the overview's counts change as jobs
// finish without the page being reloaded (server-sent events), a job's
// page shows its output, a target's page draws its prerequisites, no page
// offers a write action or shows a key or the CLS's environment, and
// /metrics agrees with mqstat --summary. Screenshots go to the test's
// artifact directory (go test -artifacts keeps them; the path is logged).
func TestDashboardInBrowser(t *testing.T) {
	chrome := chromiumPath(t)
	const canary = "dashboard-canary-4f1d9e"  // in the CLS's environment only
	const jobCanary = "job-env-canary-8c2a71" // in one job's environment (mqsub -v)
	t.Setenv("DASH_CANARY", canary)           // the CLS inherits it
	h := newHarness(t)
	h.startCLS("--local", "2", "--http", "127.0.0.1:0", "--ssh", "127.0.0.1:0")
	addr, token := h.dashboardAddr()
	base := "http://" + addr
	// cls dashboard url says the address cls serve printed.
	if r := h.run("cls", "dashboard", "url"); r.code != 0 || r.stdout != base+"/?token="+token+"\n" {
		t.Fatalf("cls dashboard url: %s", r)
	}
	// Without the token, nothing (other users of the machine reach the
	// loopback port too).
	for _, p := range []string{"/", "/jobs", "/job/1", "/events", "/metrics"} {
		if body := httpGet(t, base+p, "", http.StatusUnauthorized); strings.Contains(body, "mq_jobs") || strings.Contains(body, "<table") {
			t.Errorf("GET %s without the token: %.200s", p, body)
		}
	}
	shots := t.ArtifactDir()
	t.Logf("screenshots in %s", shots)

	// The workflow: one job prints a line, then 12 jobs wait for a file
	// (holding both placeholders), and a summary needs them all.
	hello := h.submit("hello", `echo "hello from the dashboard test <b>&"; echo "to stderr" >&2`)
	h.waitState(hello, "D", 60*time.Second)
	gate := filepath.Join(h.dir, "go")
	const n = 12
	for i := 0; i < n; i++ {
		h.submit("-q", "work", fmt.Sprintf("part%d", i), fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; echo part %d", gate, i))
	}
	var prereqs []string
	for i := 0; i < n; i++ {
		prereqs = append(prereqs, fmt.Sprintf("part%d", i))
	}
	h.submit("-q", "work", "-p", strings.Join(prereqs, ","), "summary", "echo all parts done")

	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))...)
	defer cancel()
	browser, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first call starts the browser for the life of its context: no
	// deadline there; each step then gets its own.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(browser, 90*time.Second) }
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := step()
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	load := func(path, sel string) {
		t.Helper()
		do("load "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS(sel)))
	}
	// The browser opens the tokenized URL once: it lands on the overview,
	// with the token gone from the address, and keeps a session cookie
	// (HttpOnly: the page's script cannot read it).
	do("open the tokenized URL", chromedp.Navigate(base+"/?token="+token), chromedp.WaitVisible(chromedp.CSS("#counts")))
	{
		ctx, cancel := step()
		loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " " + document.cookie`))
		cancel()
		if err != nil || strings.TrimSpace(loc) != base+"/" {
			t.Errorf("after the tokenized URL the browser is at %q (%v), want %s/ and no cookie a script can read", loc, err, base)
		}
	}
	shot := func(name string) {
		t.Helper()
		ctx, cancel := step()
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		ctx, cancel := step()
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	attr := func(sel, name string) string {
		t.Helper()
		ctx, cancel := step()
		defer cancel()
		a, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
		if err != nil {
			t.Fatalf("%s of %s: %v", name, sel, err)
		}
		return a.Value
	}
	count := func(id string) int {
		t.Helper()
		v, err := strconv.Atoi(text("#" + id))
		if err != nil {
			t.Fatalf("#%s is not a number: %v", id, err)
		}
		return v
	}

	// The overview, live: it follows /events.
	load("/", "#counts")
	waitFor(t, 60*time.Second, func() error {
		if live := attr("#updated", "data-live"); live != "on" {
			return fmt.Errorf("the overview has not had an update from /events (data-live=%q)", live)
		}
		return nil
	})
	before := count("total-D")
	if before != 1 || count("total-W") != 1 {
		t.Errorf("before the gate opens: %d done, %d waiting; want 1 (hello) and 1 (summary)", before, count("total-W"))
	}
	shot("overview-before.png")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The same page, never reloaded, counts the jobs as they finish.
	waitFor(t, 120*time.Second, func() error {
		if d := count("total-D"); d != n+2 {
			return fmt.Errorf("the overview shows %d done, want %d", d, n+2)
		}
		return nil
	})
	if count("total-all") != n+2 {
		t.Errorf("total %d, want %d", count("total-all"), n+2)
	}
	// The plots have points once a few samples are in.
	waitFor(t, 30*time.Second, func() error {
		if pts := attr("#plot-states polyline", "points"); strings.Count(pts, ",") < 3 {
			return fmt.Errorf("the state plot has too few points: %q", pts)
		}
		return nil
	})
	shot("overview-after.png")

	// One queue's jobs per state over time, live: its plot stays that
	// queue's through the updates.
	load("/?queue=work", "#counts")
	waitFor(t, 60*time.Second, func() error {
		if live := attr("#updated", "data-live"); live != "on" {
			return fmt.Errorf("the queue's overview has had no update (data-live=%q)", live)
		}
		ctx, cancel := step()
		defer cancel()
		// An SVG text has no innerText: its textContent.
		title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#plot-states .ptitle").textContent`))
		if err != nil || title != "Jobs per state in queue work" {
			return fmt.Errorf("the queue's plot is titled %q (%v)", title, err)
		}
		return nil
	})
	shot("overview-queue.png")

	// A job page shows its output, escaped, and its attempt.
	load(fmt.Sprintf("/job/%d", hello), "#stdout")
	if got := text("#stdout"); got != "hello from the dashboard test <b>&" {
		t.Errorf("the job page's stdout is %q", got)
	}
	if got := text("#stderr"); got != "to stderr" {
		t.Errorf("the job page's stderr is %q", got)
	}
	if !strings.Contains(text("#attempts"), "local") {
		t.Errorf("the attempts table names no site: %q", text("#attempts"))
	}
	shot("job.png")

	// A running job's page follows its output as it is written (the
	// stream mqstat --output --follow reads): the second line shows up on
	// the page as it was loaded, never reloaded. The job's environment
	// holds a value no page may show.
	liveGate := filepath.Join(h.dir, "go-live")
	live := h.submit("-v", "DASH_JOB_SECRET="+jobCanary, "live",
		fmt.Sprintf("echo live one; while [ ! -e %s ]; do sleep 0.05; done; echo live two", liveGate))
	h.waitState(live, "E", 60*time.Second)
	load(fmt.Sprintf("/job/%d", live), "#stdout")
	if f := attr("#stdout", "data-follow"); !strings.Contains(f, "/output/events") {
		t.Fatalf("a running job's page does not follow its output (data-follow=%q)", f)
	}
	waitFor(t, 60*time.Second, func() error {
		if got := text("#stdout"); got != "live one" {
			return fmt.Errorf("the running job's page shows %q, want its first line", got)
		}
		return nil
	})
	mctx, cancelMark := step()
	_, err := chromedp.Run(mctx, chromedp.Evaluate[bool](`window.mqSamePage = true`))
	cancelMark()
	if err != nil {
		t.Fatalf("mark the page: %v", err)
	}
	if d := h.job(live); d.State != "E" {
		t.Fatalf("job %d is %s while its gate is shut", live, d.State)
	}
	shot("job-live.png")
	if err := os.WriteFile(liveGate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() error {
		if got := text("#stdout"); got != "live one\nlive two" {
			return fmt.Errorf("the followed page shows %q, want both lines", got)
		}
		return nil
	})
	h.waitState(live, "D", 60*time.Second)
	// The stream's end tells the page the job's state.
	waitFor(t, 60*time.Second, func() error {
		if got := text("#state"); got != "D done" {
			return fmt.Errorf("the ended job's page says %q, want D done", got)
		}
		return nil
	})
	ctx, cancelEval := step()
	same, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.mqSamePage === true`))
	cancelEval()
	if err != nil || !same {
		t.Errorf("the job page was reloaded to show the new line or the end (%v)", err)
	}
	shot("job-live-ended.png")

	// The target page draws summary's prerequisites, all complete.
	load("/target/summary", "#dag")
	ctx, cancelEval = step()
	nodes, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#dag g.node.complete").length`))
	cancelEval()
	if err != nil {
		t.Fatal(err)
	}
	if nodes != n+1 {
		t.Errorf("the target graph has %d complete nodes, want %d", nodes, n+1)
	}
	shot("target.png")

	load("/jobs?queue=work", "#joblist")
	shot("jobs.png")

	// No page shows a key or the CLS's environment, or offers a write.
	hostKey, err := os.ReadFile(filepath.Join(h.home, "ssh_host_ed25519_key"))
	if err != nil {
		t.Fatalf("the SSH host key: %v", err)
	}
	secrets := []string{canary, jobCanary, keyBody(hostKey)}
	for _, p := range []string{"/", "/jobs", "/jobs?queue=work", fmt.Sprintf("/job/%d", hello), "/job/1", fmt.Sprintf("/job/%d", live),
		"/jobs?target=live", "/target/live", "/metrics", "/static/app.js"} {
		body := httpGet(t, base+p, token, http.StatusOK)
		for _, s := range secrets {
			if s != "" && strings.Contains(body, s) {
				t.Errorf("%s shows secret material (%.12s...)", p, s)
			}
		}
		if strings.Contains(strings.ToLower(body), `method="post"`) {
			t.Errorf("%s has a form that posts", p)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, fmt.Sprintf("%s/job/%d", base, hello), strings.NewReader("state=X"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /job/%d: %d, want 405", m, hello, resp.StatusCode)
		}
	}
	if d := h.job(hello); d.State != "D" {
		t.Errorf("job %d is %s after the write attempts", hello, d.State)
	}

	// /metrics agrees with mqstat --summary.
	checkMetrics(t, h, base, token)
}

// keyBody is the base64 body of a PEM private key: what must never show.
func keyBody(pem []byte) string {
	var body strings.Builder
	for _, l := range strings.Split(string(pem), "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			body.WriteString(l)
		}
	}
	if _, err := base64.StdEncoding.DecodeString(body.String()); err != nil || body.Len() < 40 {
		return ""
	}
	return body.String()[:40]
}

// httpGet gets url, with the dashboard's token unless it is "".
func httpGet(t *testing.T, url, token string, want int) string {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %.200s", url, resp.StatusCode, want, b)
	}
	return string(b)
}

// checkMetrics parses /metrics with the Prometheus text parser and checks
// its jobs per queue and state against mqstat --summary (the workflow has
// ended: the counts stand still), and the rates against the jobs run.
func checkMetrics(t *testing.T, h *harness, base, token string) {
	t.Helper()
	sum := h.summary()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(httpGet(t, base+"/metrics", token, http.StatusOK)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	got := map[string]map[string]int{}
	for _, m := range fams["mq_jobs"].GetMetric() {
		var q, st string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "queue":
				q = l.GetValue()
			case "state":
				st = l.GetValue()
			}
		}
		if got[q] == nil {
			got[q] = map[string]int{}
		}
		got[q][st] = int(m.GetGauge().GetValue())
	}
	for q, counts := range sum {
		for st, n := range counts {
			if got[q][st] != n {
				t.Errorf("mq_jobs{queue=%q,state=%q} = %d, mqstat --summary says %d", q, st, got[q][st], n)
			}
		}
	}
	if len(got) != len(sum) {
		t.Errorf("mq_jobs has queues %v, mqstat --summary %v", got, sum)
	}
	total := 0
	for _, c := range sum {
		total += c["D"]
	}
	counter := func(name string, label ...string) float64 {
		for _, m := range fams[name].GetMetric() {
			if len(label) == 0 {
				return m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label[0] && l.GetValue() == label[1] {
					return m.GetCounter().GetValue()
				}
			}
		}
		t.Errorf("no %s%v", name, label)
		return 0
	}
	if d := counter("mq_attempts_ended_total", "to", "done"); int(d) != total {
		t.Errorf("mq_attempts_ended_total{to=done} = %v, want %d", d, total)
	}
	if d := counter("mq_dispatched_jobs_total"); int(d) != total {
		t.Errorf("mq_dispatched_jobs_total = %v, want %d", d, total)
	}
	if c := counter("mq_dispatch_latency_seconds"); int(c) != total {
		t.Errorf("mq_dispatch_latency_seconds has %v observations, want %d", c, total)
	}
	if counter("mq_commit_seconds") == 0 && len(fams["mq_commit_seconds"].GetMetric()) == 0 {
		t.Error("no commit latency")
	}
	for _, name := range []string{"process_resident_memory_bytes", "go_goroutines", "mq_placeholders", "mq_transfer_bytes_total"} {
		if fams[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
	var busy, ph float64
	for _, m := range fams["mq_placeholders"].GetMetric() {
		ph += m.GetGauge().GetValue()
		for _, l := range m.GetLabel() {
			if l.GetName() == "state" && l.GetValue() == "busy" {
				busy += m.GetGauge().GetValue()
			}
		}
	}
	if ph == 0 {
		t.Error("mq_placeholders counts no placeholder of the local site")
	}
}

// TestDashboardRefusesPublicWithoutFlag: a non-loopback --http needs
// --http-public, and then the token.
func TestDashboardRefusesPublicWithoutFlag(t *testing.T) {
	h := newHarness(t)
	r := h.run("cls", "serve", "--local", "0", "--http", "0.0.0.0:0")
	if r.code != 1 || !strings.Contains(r.stderr, "not a loopback address") || !strings.Contains(r.stderr, "--http-public") {
		t.Errorf("--http 0.0.0.0:0 without --http-public: exit %d, %q", r.code, r.stderr)
	}
	r = h.run("cls", "serve", "--local", "0", "--http-public")
	if r.code != 2 {
		t.Errorf("--http-public alone: exit %d, want 2: %q", r.code, r.stderr)
	}
	h.startCLS("--local", "0", "--http", "0.0.0.0:0", "--http-public")
	addr, printed := h.dashboardAddr()
	_, port, _ := strings.Cut(addr, "]:")
	if port == "" {
		_, port, _ = strings.Cut(addr, ":")
	}
	url := "http://127.0.0.1:" + port
	httpGet(t, url+"/", "", http.StatusUnauthorized)
	httpGet(t, url+"/metrics", "", http.StatusUnauthorized)
	tokPath := filepath.Join(h.home, "http.token")
	fi, err := os.Stat(tokPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	tok, _ := os.ReadFile(tokPath)
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("with the token: %d", resp.StatusCode)
	}
	if printed != strings.TrimSpace(string(tok)) || strings.Contains(h.cls.stderr.String(), printed) {
		t.Errorf("cls printed its token to stderr that is not a terminal, or the file has another: %q", h.cls.stderr.String())
	}
}

// TestLogJSONReopenOnSIGHUP: cls serve --log-format json writes cls.log as
// one JSON object a line (its local placeholders are told to log so too),
// and SIGHUP makes it reopen cls.log after
// logrotate moved it away (the CLS goes on serving); a bad format is a
// usage error.
func TestLogJSONReopenOnSIGHUP(t *testing.T) {
	h := newHarness(t)
	if r := h.run("cls", "serve", "--local", "0", "--log-format", "xml"); r.code != 2 || !strings.Contains(r.stderr, "--log-format") {
		t.Errorf("--log-format xml: %s", r)
	}
	h.startCLS("--local", "1", "--log-format", "json")
	log := filepath.Join(h.home, "cls.log")
	first := h.submit("before", "true")
	h.waitState(first, "D", 60*time.Second)
	// The local placeholder writes its warnings to cls.log: as JSON too.
	agents := h.agents()
	if len(agents) == 0 {
		t.Fatal("no local placeholder process")
	}
	for _, pid := range agents {
		if c := cmdline(pid); !strings.Contains(c, " --log-format json") {
			t.Errorf("a local placeholder logs to cls.log as text: %s", c)
		}
	}
	if err := os.Rename(log, log+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(h.cls.pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() error {
		b, err := os.ReadFile(log)
		if err != nil || !strings.Contains(string(b), "log reopened") {
			return fmt.Errorf("no new cls.log saying it was reopened: %q %v", b, err)
		}
		return nil
	})
	if h.cls.exited() {
		t.Fatal("SIGHUP stopped the CLS")
	}
	second := h.submit("after", "true")
	h.waitState(second, "D", 60*time.Second)
	for _, p := range []string{log + ".1", log} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Errorf("%s: %q is not a JSON log line: %v", filepath.Base(p), l, err)
				continue
			}
			if m["time"] == nil || m["level"] == nil || m["msg"] == nil {
				t.Errorf("%s: %q lacks time, level or msg", filepath.Base(p), l)
			}
			n++
		}
		if n == 0 {
			t.Errorf("%s has no JSON line", filepath.Base(p))
		}
	}
}

// TestDashboardOtherUserAndFlood: another user of the machine reaches the
// loopback dashboard and gets nothing of a job (nor can read the token or
// run cls dashboard url on the owner's home); a flood of 2,000 held
// connections costs the CLS at most its connection cap in descriptors,
// and the owner's browser session and mqstat --cat --follow go on
// meanwhile. Under the default output, streams (mqstat --cat --follow of
// a streamed job is TestFollowLocal's in both modes).
func TestDashboardOtherUserAndFlood(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1", "--http", "127.0.0.1:0")
	addr, token := h.dashboardAddr()
	base := "http://" + addr
	const canary = "Bearer-canary-e2e-77c1"
	gate := filepath.Join(h.dir, "go-flood")
	id := h.submit("flood", fmt.Sprintf("echo %s; while [ ! -e %s ]; do sleep 0.05; done; echo after", canary, gate))
	h.waitState(id, "E", 60*time.Second)

	if _, err := exec.LookPath("curl"); err == nil && os.Geteuid() == 0 {
		u, _, _ := otherUser(t)
		for _, p := range []string{"/", "/jobs", fmt.Sprintf("/job/%d", id), "/events", "/metrics"} {
			out, err := exec.Command("runuser", "-u", u.Username, "--", "curl", "-s", "-m", "20", "-w", "\n%{http_code}", base+p).CombinedOutput()
			if err != nil {
				t.Fatalf("curl %s as %s: %v: %s", p, u.Username, err, out)
			}
			if !strings.HasSuffix(string(out), "\n401") || strings.Contains(string(out), canary) || strings.Contains(string(out), "mq_jobs") {
				t.Errorf("%s as %s: %.300s", p, u.Username, out)
			}
		}
		env := []string{"MQ_HOME=" + h.home, "PATH=" + os.Getenv("PATH")}
		cmd := exec.Command("runuser", "-u", u.Username, "--", filepath.Join(binDir, "cls"), "dashboard", "url")
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err == nil || strings.Contains(string(out), token) {
			t.Errorf("cls dashboard url as %s on the owner's home: %v %s", u.Username, err, out)
		}
	} else {
		t.Log("not root or no curl: the other user's requests are not tried")
	}

	fds := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", h.cls.pid()))
		if err != nil {
			t.Fatalf("the CLS's descriptors: %v", err)
		}
		return len(ents)
	}
	before := fds()
	const flood = 2000
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range flood {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			break // the kernel's backlog is full: the CLS holds no more for it
		}
		conns = append(conns, c)
	}
	t.Logf("%d connections held", len(conns))
	// The owner's browser session still gets pages (a connection that
	// made no request with the token is closed when 2 s old to make room).
	jar, _ := cookiejar.New(nil)
	br := &http.Client{Jar: jar, Timeout: 2 * time.Minute}
	resp, err := br.Get(base + "/?token=" + token)
	if err != nil {
		t.Fatalf("the owner during the flood: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the owner during the flood: %d", resp.StatusCode)
	}
	if n := fds() - before; n > 256+16 {
		t.Errorf("%d held connections cost the CLS %d descriptors, want at most the cap (256) and a few", len(conns), n)
	}
	// mqstat --cat --follow is not the dashboard's to refuse.
	follow := exec.Command(filepath.Join(binDir, "mqstat"), "--cat", strconv.FormatInt(id, 10), "--follow")
	follow.Env = h.env()
	var out strings.Builder
	follow.Stdout = &out
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "after") {
			t.Errorf("mqstat --cat --follow during the flood: %v %q", err, out.String())
		}
	case <-time.After(2 * time.Minute):
		follow.Process.Kill()
		t.Fatal("mqstat --cat --follow did not end")
	}
}
