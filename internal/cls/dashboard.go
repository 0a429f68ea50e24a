package cls

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/mq-hpc/mq/internal/metaqueue/inspect"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/internal/web"
	"github.com/mq-hpc/mq/protocol"
)

// TokenFileName is the dashboard's token in MQ_HOME, made (mode 0600)
// the first time a CLS serves its dashboard, and kept.
const TokenFileName = "http.token"

// dashboard is the HTTP side of a CLS (cls serve --http): the read-only
// pages and /metrics of package web.
type dashboard struct {
	ln  net.Listener
	web *web.Server
	srv *http.Server
}

// checkHTTPAddr reads --http: HOST:PORT, where an empty host (":8642")
// means loopback (127.0.0.1), and says whether the address is on loopback
// only (a loopback address or "localhost").
func checkHTTPAddr(addr string) (listen string, loopback bool, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, fmt.Errorf("--http %q is not HOST:PORT: %w", addr, err)
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port), true, nil
	}
	if strings.EqualFold(host, "localhost") {
		return addr, true, nil
	}
	ip := net.ParseIP(host)
	return addr, ip != nil && ip.IsLoopback(), nil
}

// loadToken reads MQ_HOME/http.token, making it (32 random bytes, hex,
// mode 0600) when missing. A token file others can read is refused.
func loadToken(home string) (tok, path string, err error) {
	path = filepath.Join(home, TokenFileName)
	f, err := mqhome.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		var b [32]byte
		rand.Read(b[:])
		tok = hex.EncodeToString(b[:])
		_, err = f.WriteString(tok + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return "", path, fmt.Errorf("cannot write the dashboard token %s: %w", path, err)
		}
		return tok, path, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return "", path, fmt.Errorf("dashboard token: %w", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return "", path, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", path, fmt.Errorf("the dashboard token %s is readable by others (mode %04o): chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := mqhome.ReadFile(path)
	if err != nil {
		return "", path, fmt.Errorf("dashboard token: %w", err)
	}
	tok = strings.TrimSpace(string(b))
	if len(tok) < 16 || strings.ContainsAny(tok, " \t\r\n") {
		return "", path, fmt.Errorf("the dashboard token in %s is shorter than 16 characters or has spaces", path)
	}
	return tok, path, nil
}

// listenHTTP opens the dashboard, on loopback or, with HTTPPublic, beyond
// it; every request needs the token (other users of the machine can reach
// a loopback port too). It writes the dashboard's address to
// MQ_HOME/http.url for DashboardURL, and removes a stale one when there is
// no dashboard.
func (c *CLS) listenHTTP() error {
	cfg := c.cfg
	urlFile := filepath.Join(c.home, URLFileName)
	if cfg.HTTPAddr == "" {
		if err := os.Remove(urlFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("dashboard: %w", err)
		}
		return nil
	}
	addr, loopback, err := checkHTTPAddr(cfg.HTTPAddr)
	if err != nil {
		return err
	}
	if !loopback && !cfg.HTTPPublic {
		return fmt.Errorf("--http %s is not a loopback address: add --http-public to serve the dashboard beyond this machine (it then requires the token in %s, as on loopback)",
			cfg.HTTPAddr, filepath.Join(c.home, TokenFileName))
	}
	tok, _, err := loadToken(c.home)
	if err != nil {
		return err
	}
	follow := cfg.Follow
	if follow == nil {
		follow = c.followOutput
	}
	wc := web.Config{Source: &dashSource{store: c.store, sites: c.sites}, Metrics: c.metrics,
		Loopback: loopback, Follow: follow, Log: c.log, Token: tok, Path: cfg.HTTPPath}
	c.metrics.SetSource(wc.Source)
	ws, err := web.New(wc)
	if err != nil {
		return err
	}
	listen := func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	if loopback {
		listen = listenLoopback
	}
	ln, err := listen(addr)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	c.closers = append(c.closers, func() { ln.Close() })
	base := dashboardBase(ln.Addr()) + strings.TrimPrefix(cfg.HTTPPath, "/")
	if err := writeURLFile(urlFile, base); err != nil {
		return err
	}
	c.closers = append(c.closers, func() { os.Remove(urlFile) })
	c.dash = &dashboard{ln: web.LimitListener(ln, cfg.HTTPConns), web: ws, srv: ws.HTTPServer()}
	// The tokenized address goes to the terminal of cls serve only; the
	// log, which gets copied into bug reports, keeps no secret.
	c.log.Info("dashboard listening", "addr", ln.Addr().String(), "public", !loopback, "url", base, "token", "MQ_HOME/"+TokenFileName+" (cls dashboard url)")
	if isTerminal(cfg.Notes) {
		fmt.Fprintf(cfg.Notes, "cls: dashboard on %s?token=%s\n", base, tok)
	} else {
		// A file (cls serve >cls.out 2>&1 &, a batch job's output)
		// takes the user's umask: others could often read it.
		fmt.Fprintf(cfg.Notes, "cls: dashboard on %s (with its token: cls dashboard url)\n", base)
	}
	return nil
}

// isTerminal says whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// URLFileName is where a CLS serving a dashboard writes its address (no
// token), for DashboardURL.
const URLFileName = "http.url"

// dashboardBase is the dashboard's address for a browser on this machine:
// a wildcard listener is reached on loopback.
func dashboardBase(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "http://" + a.String() + "/"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

func writeURLFile(path, base string) error {
	f, err := mqhome.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		_, err = f.WriteString(base + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	return nil
}

// DashboardURL returns the address of the dashboard of the CLS serving
// home, with its token (http://127.0.0.1:PORT/?token=...): what cls
// serve printed when it started. It fails when no CLS serves home, or
// when that CLS has no dashboard: an address left by a CLS that is gone
// could be another user's server by now, which must not get the token.
func DashboardURL(home string) (string, error) {
	checked, _, err := mqhome.Check(home)
	if errors.Is(err, fs.ErrNotExist) {
		// A mistyped MQ_HOME, or one no CLS has served yet.
		return "", fmt.Errorf("no CLS is serving %s: it does not exist (start one with cls serve --http 127.0.0.1:8642)", home)
	}
	if err != nil {
		return "", err
	}
	home = checked
	for name, typ := range homeEntries {
		if err := mqhome.CheckEntry(filepath.Join(home, name), typ); err != nil {
			return "", err
		}
	}
	// A CLS is serving home when its socket answers (a socket file a
	// killed CLS left refuses connections); nobody else can listen there.
	conn, err := net.DialTimeout("unix", filepath.Join(home, "cls.sock"), 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("no CLS is serving %s (start one with cls serve --http 127.0.0.1:8642)", home)
	}
	conn.Close()
	b, err := mqhome.ReadFile(filepath.Join(home, URLFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("the CLS serving %s has no dashboard (start it with cls serve --http 127.0.0.1:8642)", home)
	}
	if err != nil {
		return "", fmt.Errorf("dashboard address: %w", err)
	}
	base := strings.TrimSpace(string(b))
	if !strings.HasPrefix(base, "http://") || strings.ContainsAny(base, " ?#\t\r\n") || len(base) > 300 {
		return "", fmt.Errorf("%s does not hold a dashboard address", filepath.Join(home, URLFileName))
	}
	tok, _, err := loadToken(home)
	if err != nil {
		return "", err
	}
	// The token is hex; a hand-made one is escaped for the URL.
	return base + "?token=" + url.QueryEscape(tok), nil
}

// HTTPAddr is the address the dashboard listens on (nil without one).
func (c *CLS) HTTPAddr() net.Addr {
	if c.dash == nil {
		return nil
	}
	return c.dash.ln.Addr()
}

// serve runs the dashboard until ctx ends.
func (d *dashboard) serve(ctx context.Context) error {
	go d.web.Run(ctx)
	errc := make(chan error, 1)
	go func() { errc <- d.srv.Serve(d.ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		d.srv.Shutdown(sctx) // event streams end with their requests' contexts
		d.srv.Close()
		return nil
	case err := <-errc:
		return fmt.Errorf("dashboard: %w", err)
	}
}

// dashSource is what the dashboard reads of a CLS.
type dashSource struct {
	store *metaqueue.Store
	sites *sites
}

var _ web.Source = (*dashSource)(nil)

func (d *dashSource) Summary(ctx context.Context) ([]protocol.QueueCounts, error) {
	return d.store.Summary(ctx)
}

func (d *dashSource) Moved(ctx context.Context) (*protocol.MovedTotals, error) {
	return d.store.Catalog().Moved(ctx)
}

func (d *dashSource) JobsPage(ctx context.Context, st protocol.Stat, after int64, limit int) ([]protocol.JobInfo, error) {
	if onlyRunning(st) {
		_, ids, err := d.store.RunningByPlaceholder(ctx)
		if err != nil {
			return nil, err
		}
		var ok bool
		if st, ok = runningPage(st, after, ids); !ok {
			return nil, nil
		}
	}
	return d.store.Inspect().Page(ctx, st, after, limit)
}

// onlyRunning says whether a listing is of executing jobs only (E, P) and
// names no target or ids: the core knows those jobs in memory, where the
// listing would read every job in id order to find the few running.
func onlyRunning(st protocol.Stat) bool {
	return st.States != "" && strings.Trim(strings.ToUpper(st.States), "EP") == "" && st.Target == "" && st.TargetPrefix == "" && len(st.IDs) == 0
}

// runningPage narrows a listing of executing jobs to the jobs running now
// above after (ids, in id order), the listing's query checking each
// one's state, queue and all as before; false when there are none. Past
// the most ids a listing may name it is left as it is.
func runningPage(st protocol.Stat, after int64, ids []int64) (protocol.Stat, bool) {
	i, _ := slices.BinarySearch(ids, after+1)
	ids = ids[i:]
	switch {
	case len(ids) == 0:
		return st, false
	case len(ids) <= maxRunningIDs:
		st.IDs = ids
	}
	return st, true
}

// maxRunningIDs is the most ids runningPage names (inspect's bound on a
// listing's ids is 10,000).
const maxRunningIDs = 10000

func (d *dashSource) Job(ctx context.Context, id int64) (protocol.JobDetail, error) {
	return d.store.Inspect().Job(ctx, id)
}

func (d *dashSource) TargetGraph(ctx context.Context, name string, limit int) ([]inspect.TargetNode, bool, error) {
	return d.store.Inspect().TargetGraph(ctx, name, limit)
}

// Sites joins the site manager's view (batch-queued and running
// placeholders) with the connected placeholders and the jobs each runs.
func (d *dashSource) Sites(ctx context.Context) ([]web.Site, error) {
	running, _, err := d.store.RunningByPlaceholder(ctx)
	if err != nil {
		return nil, err
	}
	conn := d.sites.connected.snapshot()
	type agg struct{ idle, busy, slots, slotsBusy int }
	per := map[string]*agg{}
	for id, p := range conn {
		a := per[p.site]
		if a == nil {
			a = &agg{}
			per[p.site] = a
		}
		n := running[id]
		a.slots += p.slots
		a.slotsBusy += min(n, p.slots)
		if n > 0 {
			a.busy++
		} else {
			a.idle++
		}
	}
	list := d.sites.mgr.List()
	if err := d.sites.withCuts(ctx, list); err != nil {
		return nil, err
	}
	var out []web.Site
	for _, si := range list {
		s := web.Site{Name: si.Name, Type: si.Type, State: si.State, Error: si.Error, Min: si.Min, Max: si.Max,
			Queued: si.Queued, Running: si.Running, Paused: si.Paused, Broken: brokenNote(si.Broken),
			Unreachable: si.Unreachable, HeldLeases: si.HeldLeases, Cut: si.CutNote(utcClock)}
		if a := per[si.Name]; a != nil {
			s.Idle, s.Busy, s.Slots, s.SlotsBusy = a.idle, a.busy, a.slots, a.slotsBusy
		}
		out = append(out, s)
	}
	return out, nil
}

// connectedPHs tracks the placeholders connected now, by id: their site
// and slots (the site manager counts them per site, not which is which).
type connectedPHs struct {
	mu sync.Mutex
	m  map[int64]phInfo
}

type phInfo struct {
	site  string
	slots int
}

func (c *connectedPHs) set(id int64, reg protocol.Register, connected bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !connected {
		delete(c.m, id)
		return
	}
	if c.m == nil {
		c.m = map[int64]phInfo{}
	}
	c.m[id] = phInfo{site: reg.Site, slots: max(reg.Slots, 1)}
}

func (c *connectedPHs) snapshot() map[int64]phInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int64]phInfo, len(c.m))
	for k, v := range c.m {
		out[k] = v
	}
	return out
}

// followTail is where a job page's stream of a running job's output starts:
// the last followTail bytes written (the page is served the same tail).
const followTail = 64 << 10

// followOutput is the dashboard's web.Follow: a running job's output, as
// mqstat --cat --follow gets it (CLS.Output), from its last followTail
// bytes: a page of a job that wrote gigabytes is not sent them all.
func (c *CLS) followOutput(ctx context.Context, id int64, stderr bool) (<-chan []byte, error) {
	stream := "stdout"
	if stderr {
		stream = "stderr"
	}
	ch := make(chan []byte, 4)
	go func() {
		defer close(ch)
		for f, err := range c.outputs.seq(ctx, protocol.OutputQuery{ID: id, Stream: stream, Follow: true}, followTail, true) {
			if err != nil {
				return
			}
			if len(f.Data) == 0 {
				continue
			}
			select {
			case ch <- f.Data:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// brokenNote is the dashboard's word on a site's broken placeholders:
// how many, and the latest's host and why.
// utcClock writes a time as the dashboard does, in UTC: the clock, and
// the day too when it is not today.
func utcClock(t time.Time) string {
	t = t.UTC()
	if t.Format(time.DateOnly) != time.Now().UTC().Format(time.DateOnly) {
		return t.Format("Jan 02 15:04:05") + " UTC"
	}
	return t.Format("15:04:05") + " UTC"
}

func brokenNote(bs []protocol.BrokenPlaceholder) string {
	if len(bs) == 0 {
		return ""
	}
	b := bs[0]
	on := ""
	if b.Host != "" {
		on = " on " + b.Host
	}
	return fmt.Sprintf("%d broken, their node cannot run jobs (latest: placeholder %d%s: %s)", len(bs), b.ID, on, b.Why)
}
