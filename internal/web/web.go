// Package web serves the CLS's read-only dashboard and its Prometheus
// metrics over HTTP (cls serve --http): counts per queue and state over
// time, the sites and their placeholders, throughput and queue-wait
// plots, a target's prerequisite graph, jobs page by page, and a job's
// attempts, transfers and output. Pages are rendered on the server with
// html/template (every string a peer supplied is escaped), plots are SVG
// made on the server, assets are embedded, and the overview updates by
// server-sent events. Nothing here changes the metaqueue: every route is
// GET or HEAD.
package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed assets
var assets embed.FS

// Config is what a dashboard serves.
type Config struct {
	Source  Source
	Metrics *Metrics // nil: no /metrics, and no rates in the plots
	// Token, when set, is required of every request (Authorization:
	// Bearer, or the session cookie a browser gets by visiting a page
	// once with ?token=). A CLS always has one, on loopback too: other
	// users of the machine can reach a loopback port.
	Token string
	// Loopback refuses requests whose Host is not a loopback name or
	// address unless they carry the token (DNS rebinding: a web page the
	// user visits cannot reach the dashboard under a name of its own).
	Loopback bool
	// Path is where the dashboard is served ("" or "/": the root), for a
	// proxy that passes its path prefix on (Open OnDemand's /node/HOST/PORT/,
	// jupyter-server-proxy's /proxy/absolute/PORT/): "/node/c1/8642/".
	// Requests elsewhere get 404. A proxy that strips the prefix needs
	// none: the pages link only relatively.
	Path string
	// Follow, when set, streams a running job's output to its page.
	Follow Follow
	// Interval is how often the overview samples the CLS (default 1s);
	// Keep how many samples its plots show (default 900).
	Interval time.Duration
	Keep     int
	// MaxStreams bounds the event streams (overview updates and followed
	// output) open at once (default DefaultMaxStreams), MaxClientStreams
	// those of one client (default DefaultMaxClientStreams).
	MaxStreams       int
	MaxClientStreams int
	// OutputTail is the most of a job's output a page shows (default
	// 64 KiB, the end of it).
	OutputTail int64
	Log        *slog.Logger
}

// Server is a dashboard. Run samples the CLS; Handler serves it.
type Server struct {
	cfg   Config
	tmpl  *template.Template
	smp   *sampler
	token [sha256.Size]byte
	run   [16]byte // random, this server's own: its sessions' MACs name it
	mux   *http.ServeMux
	strm  *streamGate
}

// New makes a dashboard for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Source == nil {
		return nil, errors.New("web: Config.Source is nil")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 900
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.MaxClientStreams <= 0 {
		cfg.MaxClientStreams = DefaultMaxClientStreams
	}
	if cfg.OutputTail <= 0 {
		cfg.OutputTail = 64 << 10
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := CheckPath(cfg.Path); err != nil {
		return nil, err
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, tmpl: tmpl, token: sha256.Sum256([]byte(cfg.Token)),
		strm: &streamGate{max: cfg.MaxStreams, perClient: cfg.MaxClientStreams},
		smp:  &sampler{src: cfg.Source, metrics: cfg.Metrics, interval: cfg.Interval, keep: cfg.Keep, log: cfg.Log, maxSubs: cfg.MaxStreams}}
	rand.Read(s.run[:])
	sub, _ := fs.Sub(assets, "assets/static")
	static := staticFS{sub}
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", s.overview)
	m.HandleFunc("GET /jobs", s.jobs)
	m.HandleFunc("GET /job/{id}", s.job)
	m.HandleFunc("GET /job/{id}/output/events", s.outputEvents)
	m.HandleFunc("GET /target/{name...}", s.target)
	m.HandleFunc("GET /events", s.events)
	m.HandleFunc("GET /session", sessionProbe)
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	if cfg.Metrics != nil {
		m.Handle("GET /metrics", promhttp.HandlerFor(cfg.Metrics.Registry(), promhttp.HandlerOpts{ErrorLog: slogPrinter{cfg.Log}}))
	}
	s.mux = m
	return s, nil
}

// Run samples the CLS until ctx ends.
func (s *Server) Run(ctx context.Context) { s.smp.run(ctx) }

// Handler serves the dashboard: only GET and HEAD, with the token when
// there is one, and headers that keep the pages to themselves.
// HTTPServer serves it with timeouts.
func (s *Server) Handler() http.Handler {
	h := s.handler()
	p := strings.TrimSuffix(s.cfg.Path, "/")
	if p == "" {
		return h
	}
	strip := http.StripPrefix(p, h)
	escaped := (&url.URL{Path: p}).EscapedPath()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == p:
			// The pages link relative to the directory: on to it.
			redirect(w, p+"/")
		case strings.HasPrefix(r.URL.Path, p+"/") && strings.HasPrefix(r.URL.EscapedPath(), escaped+"/"):
			// Under the path as the browser sees it too: after
			// p+"%2F" its relative links would lead out of p.
			strip.ServeHTTP(w, r)
		default:
			w.Header().Set("Connection", "close")
			http.NotFound(w, r)
		}
	})
}

// staticFS is the pages' files. A name fs.ValidPath refuses (one not
// UTF-8: /static/%F9) is simply not there: fs.Sub answers it with
// fs.ErrInvalid, which http.FileServer serves as a 500.
type staticFS struct{ fs.FS }

func (f staticFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return f.FS.Open(name)
}

// CheckPath checks Config.Path: an absolute path ending in "/", with
// no dot segments, query or escapes.
func CheckPath(p string) error {
	if p == "" || p == "/" {
		return nil
	}
	clean := path.Clean(p) + "/"
	if !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/") || clean != p || strings.ContainsAny(p, "?#%\\ ") || strings.HasPrefix(p, "//") {
		return fmt.Errorf("dashboard path %q is not an absolute path ending in / without dot segments, spaces, escapes or ? and # (e.g. /node/c001/8642/)", protocol.ClipText(p, 200))
	}
	return nil
}

func (s *Server) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the dashboard is read-only", http.StatusMethodNotAllowed)
			return
		}
		if s.cfg.Loopback && !loopbackHost(r.Host) && !s.vouched(r) {
			http.Error(w, "this dashboard answers only to a loopback host name", http.StatusMisdirectedRequest)
			return
		}
		client, ok := s.authorize(w, r)
		if !ok {
			return
		}
		trust(r.Context())
		rw := &relativeRedirects{ResponseWriter: w, root: rootOf(r)}
		s.mux.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), clientKey{}, client)))
	})
}

// relativeRedirects makes the ServeMux's redirects ("/target" to
// "/target/", a path cleaned) relative to the page asked for: an absolute
// path would leave a dashboard a proxy serves under a path prefix.
type relativeRedirects struct {
	http.ResponseWriter
	root string
}

func (w *relativeRedirects) WriteHeader(code int) {
	h := w.Header()
	if loc := h.Get("Location"); code/100 == 3 && strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") {
		h.Set("Location", w.root+loc[1:])
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController flush the event streams.
func (w *relativeRedirects) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// loopbackHost says whether a request's Host names this machine's
// loopback: localhost or a loopback address, with any port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics", "err", fmt.Sprint(v...)) }

var funcs = template.FuncMap{
	"stateName": func(s string) string {
		if len(s) == 1 {
			return job.State(s[0]).Name()
		}
		return s
	},
	"states": func() []string {
		var out []string
		for _, s := range job.States {
			out = append(out, s.String())
		}
		return out
	},
	"clip":      func(s string, n int) string { return protocol.ClipText(s, n) },
	"page":      func(title, root string) pageHead { return pageHead{title, root} },
	"targetURL": targetURL,
	"bytes":     protocol.FormatBytes,
	// countsLine is "3 D, 2 F": the states with jobs, as mqstat shows an array.
	"countsLine": func(m map[string]int) string {
		var parts []string
		for _, st := range job.States {
			if n := m[st.String()]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, st))
			}
		}
		return strings.Join(parts, ", ")
	},
	"sum": func(m map[string]int) int {
		t := 0
		for _, v := range m {
			t += v
		}
		return t
	},
}

// pageHead is what a page's head and foot need: its title, and Root.
type pageHead struct{ Title, Root string }

// rootOf is the way from the page r asks for back to the dashboard's
// root, as a relative reference ("./" for "/" and "/jobs", "../" for
// "/job/7"): the pages link only relative to where they are, so a proxy
// may serve the dashboard under any path prefix.
func rootOf(r *http.Request) string {
	if depth := strings.Count(r.URL.EscapedPath(), "/") - 1; depth > 0 {
		return strings.Repeat("../", depth)
	}
	return "./"
}

// page renders template name with data, or a plain error.
func (s *Server) page(w http.ResponseWriter, name string, data any) {
	var b strings.Builder
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		s.cfg.Log.Warn("dashboard: render", "page", name, "err", err)
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, b.String())
}

// fail answers an error from the Source: not found as 404, bad input 400.
func (s *Server) fail(w http.ResponseWriter, err error) {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe) && pe.Code == protocol.CodeNotFound:
		http.Error(w, pe.Msg, http.StatusNotFound)
	case errors.As(err, &pe) && pe.Code == protocol.CodeBadRequest:
		http.Error(w, pe.Msg, http.StatusBadRequest)
	default:
		s.cfg.Log.Warn("dashboard", "err", err)
		http.Error(w, "the CLS could not answer", http.StatusServiceUnavailable)
	}
}

// targetURL is the address of target name's page, relative to the root. A name is one escaped
// path segment: "a?b#c", "x/../y" or "pct%2e" must not become a query, a
// fragment, dot segments or an escape; "." and "..", which a browser
// would take as dot segments however written, go in the query.
func targetURL(name string) string {
	if name == "." || name == ".." {
		return "target/?" + url.Values{"name": {name}}.Encode()
	}
	return "target/" + url.PathEscape(name)
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not a job id", protocol.ClipText(s, 40))
	}
	return id, nil
}
