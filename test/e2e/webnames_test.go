//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium for one test, each step with its own
// deadline.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	chrome := chromiumPath(t)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first call starts the browser for the life of its context.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx}
}

func (b *browser) load(u, sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		b.t.Fatalf("load %s: %v", u, err)
	}
}

// eval runs a script in the page and returns its value.
func eval[T any](b *browser, js string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](js))
}

// TestDashboardLiveColumnsAndOddNames watches, in headless Chromium, a CLS
// holding jobs in every state the overview has a column for and targets
// and queues with names a URL treats specially: the overview's live
// updates keep each count under its own column (held and prefetched jobs
// included) and the totals right; every link to a target leads to that
// target's page; and no job's command, output or name becomes markup.
func TestDashboardLiveColumnsAndOddNames(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1", "--http", "127.0.0.1:0")
	addr, token := h.dashboardAddr()
	base := "http://" + addr

	const markup = `<img src=x onerror="window.mqXSS=1"><script>window.mqXSS=2</script>`
	odd := []string{"a?b#c", "pct%2e%2e", "../jobs", "x/y", "t&x=1", "sp%20ace", "%zz", "..", "."}
	var last int64
	for _, name := range odd {
		last = h.submit("-q", `q"&<`, name, "echo '"+markup+"'")
	}
	h.waitState(last, "D", 60*time.Second)
	held := h.submit("-H", "held", "true")
	h.waitState(held, "H", 30*time.Second)
	// A queue per experiment: more queues than the overview shows.
	const exps = 44
	var lines strings.Builder
	for i := range exps {
		fmt.Fprintf(&lines, `{"target":"e%d","command":"true","queue":"exp-%02d","hold":true}`+"\n", i, i)
	}
	if r := h.runIn(h.dir, strings.NewReader(lines.String()), "mqsub", "-f", "-"); r.code != 0 {
		t.Fatalf("mqsub -f: %s", r)
	}
	wantJobs := len(odd) + 1 + exps

	b := newBrowser(t)
	b.load(base+"/?token="+token, "#counts")
	// The overview, once live: a row per queue with a cell per state of
	// the header, and the held job counted under H.
	waitFor(t, 60*time.Second, func() error {
		live, err := eval[string](b, `document.getElementById("updated").dataset.live`)
		if err != nil || live != "on" {
			return fmt.Errorf("the overview has had no update from /events (live=%q, %v)", live, err)
		}
		return nil
	})
	hdr, err := eval[int](b, `document.querySelectorAll("#counts thead th").length`)
	if err != nil {
		t.Fatal(err)
	}
	cells, err := eval[[]int](b, `Array.from(document.querySelectorAll("#queues tr"), tr => tr.cells.length)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cells {
		if n != hdr {
			t.Errorf("after a live update a queue's row has %d cells under a header of %d: %v", n, hdr, cells)
			break
		}
	}
	for id, want := range map[string]int{"total-H": 1 + exps, "total-D": len(odd), "total-all": wantJobs} {
		got, err := eval[string](b, `document.getElementById("`+id+`").textContent`)
		if err != nil || got != strconv.Itoa(want) {
			t.Errorf("after a live update #%s is %q (%v), want %d", id, got, err, want)
		}
	}
	// The queues beyond the 40 shown (the one with ended jobs only first)
	// are one row, live too: the queue of ended jobs only, and 5 of 44.
	more, err := eval[string](b, `Array.from(document.querySelectorAll("#queues tr.more"), tr => tr.cells[0].textContent + " " + tr.cells[tr.cells.length-2].textContent).join("|")`)
	if err != nil || more != "6 more queues (mqstat --summary) "+strconv.Itoa(len(odd)+5) {
		t.Errorf("the row of the queues not shown is %q (%v)", more, err)
	}
	// The default queue's H cell (header order) shows the held job.
	col, err := eval[string](b, `(() => {
		const ths = Array.from(document.querySelectorAll("#counts thead th"));
		const i = ths.findIndex(th => th.textContent.startsWith("H "));
		const row = Array.from(document.querySelectorAll("#queues tr")).find(tr => tr.cells[0].textContent === "default");
		return i < 0 || !row ? "none" : row.cells[i].textContent;
	})()`)
	if err != nil || col != "1" {
		t.Errorf("the default queue's H column shows %q (%v), want 1 (the held job)", col, err)
	}

	// Each target's link, as the browser resolves it, leads to its page.
	b.load(base+"/jobs?"+url.Values{"queue": {`q"&<`}}.Encode(), "#joblist")
	for _, name := range odd {
		href, err := eval[string](b, fmt.Sprintf(`Array.from(document.querySelectorAll("#joblist a")).find(a => a.textContent === %s).href`, strconv.Quote(name)))
		if err != nil {
			t.Fatalf("the link of target %q: %v", name, err)
		}
		b.load(href, "body")
		if h1, err := eval[string](b, `document.querySelector("h1").textContent`); err != nil || h1 != "Target "+name {
			t.Errorf("target %q links to %s, which shows %q (%v)", name, href, h1, err)
		}
		b.load(base+"/jobs?"+url.Values{"queue": {`q"&<`}}.Encode(), "#joblist")
	}

	// Names, commands and output stay text.
	for _, p := range []string{"/", "/jobs", fmt.Sprintf("/job/%d", last), "/target/" + url.PathEscape(odd[0])} {
		b.load(base+p, "main")
		got, err := eval[string](b, `String(window.mqXSS) + " " + document.querySelectorAll("main img, main script").length`)
		if err != nil || got != "undefined 0" {
			t.Errorf("%s: a job's markup ran or made elements: %q (%v)", p, got, err)
		}
	}
	b.load(fmt.Sprintf("%s/job/%d", base, last), "#stdout")
	if got, err := eval[string](b, `document.getElementById("stdout").textContent`); err != nil || got != markup+"\n" {
		t.Errorf("the job's stdout shows as %q (%v), want the text %q", got, err, markup)
	}
}
