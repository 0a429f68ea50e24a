//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardSessionEndsWithRestart: pages left open in a browser (the
// overview, and a running job's page following its output) while the
// CLS is down show it is off and nothing more; once the CLS is back on
// the same port their session cookie, signed for the earlier run, opens
// nothing, and each page says its session ended and to open the address
// `cls dashboard url` prints again (the wording of
// docs/guide/dashboard.md), which then works.
func TestDashboardSessionEndsWithRestart(t *testing.T) {
	chrome := chromiumPath(t)
	h := newHarness(t)
	h.startCLS("--local", "1", "--http", "127.0.0.1:0")
	addr, token := h.dashboardAddr()
	base := "http://" + addr
	gate := filepath.Join(h.dir, "go")
	id := h.submit("slow", fmt.Sprintf("echo started; while [ ! -e %s ]; do sleep 0.1; done", gate))
	h.waitState(id, "E", 60*time.Second)

	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))...)
	defer cancel()
	overview, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(overview); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	// A second tab for the job's page. The first call on a context makes
	// its browser or tab for the context's life: no deadline there.
	jobPage, cancel := chromedp.NewContext(overview)
	defer cancel()
	if err := chromedp.Do(jobPage); err != nil {
		t.Fatalf("open a second tab: %v", err)
	}
	do := func(tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(tab, 90*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(tab context.Context, js string) (string, error) {
		ctx, cancel := context.WithTimeout(tab, 90*time.Second)
		defer cancel()
		return chromedp.Run(ctx, chromedp.Evaluate[string](js))
	}
	// What a page says: whether it is live, and its session message.
	const live = `document.getElementById("updated") ? document.getElementById("updated").dataset.live : "no overview"`
	const ended = `document.getElementById("session-ended") ? document.getElementById("session-ended").textContent : ""`
	const message = "This page's session has ended: the CLS was restarted. Open the address cls dashboard url prints again."

	do(overview, "open the tokenized URL", chromedp.Navigate(base+"/?token="+token), chromedp.WaitVisible(chromedp.CSS("#counts")))
	do(jobPage, "open the running job's page", chromedp.Navigate(fmt.Sprintf("%s/job/%d", base, id)), chromedp.WaitVisible(chromedp.CSS("#stdout")))
	waitFor(t, 60*time.Second, func() error {
		if v, err := eval(overview, live); err != nil || v != "on" {
			return fmt.Errorf("the overview is not live (data-live=%q, %v)", v, err)
		}
		if v, err := eval(jobPage, `document.getElementById("stdout").textContent`); err != nil || v != "started\n" {
			return fmt.Errorf("the job page follows no output: %q (%v)", v, err)
		}
		return nil
	})

	// Down: the overview is off; neither page says the session ended
	// (the CLS may come back, and the session with it, until it does).
	h.stopCLS(syscall.SIGTERM, time.Minute)
	waitFor(t, 60*time.Second, func() error {
		if v, err := eval(overview, live); err != nil || v != "off" {
			return fmt.Errorf("with the CLS down the overview says data-live=%q (%v), want off", v, err)
		}
		if v, err := eval(overview, `document.getElementById("updated").textContent`); err != nil || !strings.HasSuffix(v, " UTC, not live") {
			return fmt.Errorf("with the CLS down the overview's time says %q (%v), want it not live", v, err)
		}
		return nil
	})
	// Past the browser's first retries (3 s apart) against the closed port.
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		for _, tab := range []context.Context{overview, jobPage} {
			if v, err := eval(tab, ended); err != nil || v != "" {
				t.Fatalf("with the CLS down a page says %q (%v), want nothing of a session", v, err)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}

	// Back, on the same port, with the same token: a new run.
	h.startCLS("--local", "1", "--http", addr)
	for _, tab := range []struct {
		name string
		ctx  context.Context
	}{{"the overview", overview}, {"the job page", jobPage}} {
		waitFor(t, 90*time.Second, func() error {
			if v, err := eval(tab.ctx, ended); err != nil || strings.Join(strings.Fields(v), " ") != message {
				return fmt.Errorf("after the restart %s says %q (%v), want %q", tab.name, v, err, message)
			}
			return nil
		})
	}
	if v, err := eval(overview, live); err != nil || v != "ended" {
		t.Errorf("after the restart the overview says data-live=%q (%v), want ended", v, err)
	}

	// What the message says to do works: the address again, and the
	// page is live.
	r := h.run("cls", "dashboard", "url")
	if r.code != 0 {
		t.Fatalf("cls dashboard url: %s", r)
	}
	do(overview, "open the address again", chromedp.Navigate(strings.TrimSpace(r.stdout)), chromedp.WaitVisible(chromedp.CSS("#counts")))
	waitFor(t, 60*time.Second, func() error {
		if v, err := eval(overview, live); err != nil || v != "on" {
			return fmt.Errorf("the overview opened again is not live (data-live=%q, %v)", v, err)
		}
		if v, err := eval(overview, ended); err != nil || v != "" {
			return fmt.Errorf("the overview opened again says %q (%v)", v, err)
		}
		return nil
	})
}
