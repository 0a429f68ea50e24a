//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardBehindProxyInBrowser serves a CLS's dashboard the way
// jupyter-server-proxy does, under /proxy/PORT/ of another origin, the
// prefix stripped and the browser's Host passed on, and uses it in
// headless Chromium: the tokenized address, the live overview, the
// navigation, the search form, a running job's followed output, all
// under the prefix; the session cookie is not sent to the origin's other
// paths.
func TestDashboardBehindProxyInBrowser(t *testing.T) {
	chrome := chromiumPath(t)
	h := newHarness(t)
	h.startCLS("--local", "1", "--http", "127.0.0.1:0", "--ssh", "127.0.0.1:0")
	addr, token := h.dashboardAddr()
	_, port, _ := net.SplitHostPort(addr)
	target, _ := url.Parse("http://" + addr)
	prefix := "/proxy/" + port + "/"
	var mu sync.Mutex
	var leaked []string
	mux := http.NewServeMux()
	mux.Handle(prefix, http.StripPrefix(strings.TrimSuffix(prefix, "/"), &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
	}, FlushInterval: -1}))
	mux.HandleFunc("/other/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for _, c := range r.Cookies() {
			leaked = append(leaked, c.Name)
		}
		mu.Unlock()
		io.WriteString(w, "<!doctype html><title>other</title><p id=other>another application</p>")
	})
	front := httptest.NewServer(mux)
	defer front.Close()
	_, fport, _ := net.SplitHostPort(front.Listener.Addr().String())
	origin := "http://hub.example:" + fport
	base := origin + prefix

	gate := filepath.Join(h.dir, "go")
	live := h.submit("-q", "work", "live", fmt.Sprintf("echo line one; while [ ! -e %s ]; do sleep 0.05; done; echo line two", gate))
	h.waitState(live, "E", 60*time.Second)

	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000),
		chromedp.Flag("host-resolver-rules", "MAP hub.example 127.0.0.1"))...)
	defer cancel()
	browser, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 90*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(js string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 90*time.Second)
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return s
	}
	at := func(want string) {
		t.Helper()
		if got := eval(`location.href`); got != want {
			t.Errorf("the browser is at %s, want %s", got, want)
		}
	}

	do("open the tokenized address", chromedp.Navigate(base+"?token="+token), chromedp.WaitVisible(chromedp.CSS("#counts")))
	at(base)
	if c := eval(`document.cookie`); c != "" {
		t.Errorf("a script reads the cookie %q", c)
	}
	// Its style and script came through the prefix: the overview goes
	// live on /events.
	if n := eval(`String(document.styleSheets.length && document.styleSheets[0].cssRules.length)`); n == "0" {
		t.Error("the overview has no style")
	}
	waitFor(t, 60*time.Second, func() error {
		if v := eval(`document.getElementById("updated").dataset.live`); v != "on" {
			return fmt.Errorf("the overview behind the proxy has had no update (data-live=%q)", v)
		}
		return nil
	})
	// The live rows' links (made by the script) stay under the prefix.
	if href := eval(`document.querySelector("#queues a").href`); !strings.HasPrefix(href, base+"jobs?queue=") {
		t.Errorf("the overview's live row links to %s", href)
	}
	do("click jobs", chromedp.Click(chromedp.CSS(`nav a[href$="jobs"]`)), chromedp.WaitVisible(chromedp.CSS("#joblist")))
	at(base + "jobs")
	do("search a target", chromedp.SetValue(chromedp.CSS(`form.find input[name=target]`), "live"),
		chromedp.Submit(chromedp.CSS(`form.find`)), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#joblist a[href$="job/%d"]`, live))))
	at(base + "jobs?target=live&state=")
	do("open the running job", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#joblist a[href$="job/%d"]`, live))), chromedp.WaitVisible(chromedp.CSS("#stdout")))
	at(fmt.Sprintf("%sjob/%d", base, live))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() error {
		if got := strings.TrimSpace(eval(`document.getElementById("stdout").textContent`)); got != "line one\nline two" {
			return fmt.Errorf("the followed output behind the proxy is %q", got)
		}
		return nil
	})
	do("follow the target link", chromedp.Click(chromedp.CSS(`dl.kv a[href*="target/"]`)), chromedp.WaitVisible(chromedp.CSS("#dag")))
	at(base + "target/live")
	do("back to the overview", chromedp.Click(chromedp.CSS(`a.brand`)), chromedp.WaitVisible(chromedp.CSS("#counts")))
	at(base)
	do("visit another application of the origin", chromedp.Navigate(origin+"/other/"), chromedp.WaitVisible(chromedp.CSS("#other")))
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Errorf("another application of the origin was sent the cookies %v", leaked)
	}
}
