package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Who may read the dashboard. Every request carries the token: in an
// Authorization: Bearer header (scripts, Prometheus), or in a session
// cookie a browser got by visiting a page once with ?token= (then
// redirected to the page without it, as Jupyter does). The cookie holds
// no token: a random session id and its HMAC under the token and this
// server's run, so the dashboard keeps no session state and each session
// is a client of its own for the stream limits. A session ends with the
// server that made it: an open page keeps asking its port for events
// while the CLS is down, and whoever takes the port meanwhile (another
// user of the machine) receives the cookie; made by an earlier run, it
// opens nothing now.

// sessionCookie names the cookie of the dashboard that answers on host
// (HOST:PORT of the request): a browser sends a host's cookies to all of
// its ports, so two dashboards on one machine keep theirs apart.
func sessionCookie(host string) string {
	port := "80"
	if _, p, err := net.SplitHostPort(host); err == nil && p != "" {
		port = p
	}
	return "mq_session_" + port
}

// newSession returns a fresh cookie value: id "." HMAC(token, id).
func (s *Server) newSession() string {
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	return id + "." + s.sessionMAC(id)
}

func (s *Server) sessionMAC(id string) string {
	m := hmac.New(sha256.New, []byte(s.cfg.Token))
	m.Write([]byte("mq dashboard session "))
	m.Write(s.run[:])
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}

// session checks a cookie's value and returns its id.
func (s *Server) session(v string) (string, bool) {
	id, mac, ok := strings.Cut(v, ".")
	if !ok || len(id) != 32 || len(mac) != 2*sha256.Size {
		return "", false
	}
	return id, hmac.Equal([]byte(mac), []byte(s.sessionMAC(id)))
}

func (s *Server) tokenOK(tok string) bool {
	h := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(h[:], s.token[:]) == 1
}

// authorize checks the request's token, in constant time, and says which
// client it comes from (the key of the stream limits). ?token= answers
// with the cookie and a redirect to the same page without it, so the
// token stays out of the history; the caller then serves nothing more.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) (client string, ok bool) {
	if s.cfg.Token == "" {
		return "addr " + remoteIP(r), true
	}
	if client, ok := s.credentials(r); ok {
		return client, true
	}
	if q := r.URL.Query(); q.Has("token") && s.tokenOK(q.Get("token")) {
		s.startSession(w, r, q)
		return "", false
	}
	h := w.Header()
	h.Set("WWW-Authenticate", `Bearer realm="mq"`)
	// A peer without the token keeps no connection open between requests.
	h.Set("Connection", "close")
	http.Error(w, "a token is required (MQ_HOME/http.token; cls dashboard url prints the address with it): Authorization: Bearer TOKEN, or ?token=TOKEN once in a browser", http.StatusUnauthorized)
	return "", false
}

// credentials checks a bearer token or a session cookie.
func (s *Server) credentials(r *http.Request) (client string, ok bool) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenOK(tok) {
		// Scripts and scrapers: one client per address.
		return "bearer " + remoteIP(r), true
	}
	// Every cookie of the name: a browser may hold one of an older path
	// beside this one, and sends both.
	name := sessionCookie(r.Host)
	for _, c := range r.CookiesNamed(name) {
		if id, ok := s.session(c.Value); ok {
			return "session " + id, true
		}
	}
	return "", false
}

// vouched says whether a request carries the token, in any of its
// forms: such a request may name any Host (a proxy such as
// jupyter-server-proxy passes the browser's on), since a page that
// reaches a loopback dashboard through a rebound DNS name has neither the
// token nor the cookie, which the browser keeps per host name.
func (s *Server) vouched(r *http.Request) bool {
	if s.cfg.Token == "" {
		return false
	}
	if _, ok := s.credentials(r); ok {
		return true
	}
	q := r.URL.Query()
	return q.Has("token") && s.tokenOK(q.Get("token"))
}

// startSession answers a valid ?token=: the session cookie and a
// redirect to the page without the token. Behind a proxy that serves the
// dashboard under a path prefix the server does not know that prefix, so
// the cookie has no Path attribute: the browser then scopes it to the
// directory of the address it asked for, which is the dashboard's root
// when the request is for a page at the root ("/", "/jobs"), and no
// wider. A page deeper down ("/job/7?token=") first sends the browser to
// the root with the token and the page to come back to (next).
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, q url.Values) {
	p := r.URL.EscapedPath()
	depth := strings.Count(p, "/") - 1
	q.Del("token")
	if depth > 0 {
		back := url.URL{RawPath: p[1:], Path: r.URL.Path[1:], RawQuery: q.Encode()}
		next := url.Values{"token": {r.URL.Query().Get("token")}, "next": {back.String()}}
		redirect(w, strings.Repeat("../", depth)+"?"+next.Encode())
		return
	}
	// Secure when the browser came over TLS (a proxy's X-Forwarded-Proto
	// says so: JupyterHub's, Open OnDemand's): such a cookie never goes
	// out in plain HTTP, where anyone on the path could read it.
	secure := r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	http.SetCookie(w, &http.Cookie{Name: sessionCookie(r.Host), Value: s.newSession(), HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
	loc := "./" + p[strings.LastIndex(p, "/")+1:]
	if next := q.Get("next"); next != "" && depth == 0 {
		loc = "./" + relativePath(next)
	} else if len(q) > 0 {
		loc += "?" + q.Encode()
	}
	redirect(w, loc)
}

// relativePath keeps of next a path and query relative to the
// dashboard's root; anything else (a scheme, a host, an absolute path)
// becomes the root. Prefixed with "./", it cannot leave the dashboard.
func relativePath(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || strings.HasPrefix(u.Path, "/") {
		return ""
	}
	if slices.Contains(strings.Split(u.Path, "/"), "..") {
		return ""
	}
	u.Fragment = ""
	return u.String()
}

// redirect answers 303 to loc, a reference relative to the request's
// address: http.Redirect would make it an absolute path, which behind a
// proxy that strips a path prefix leads out of the dashboard.
func redirect(w http.ResponseWriter, loc string) {
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusSeeOther)
}

func remoteIP(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// sessionProbe answers a request that got this far (its session, or
// token, is good) with 204. An open page asks it when an event stream
// stops: an EventSource cannot see the status it was refused with, and
// a 401 here tells the page its session ended with the CLS that made it
// (the CLS was restarted) rather than that the CLS is down.
func sessionProbe(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNoContent)
}

// clientKey is the context key of a request's client.
type clientKey struct{}

func clientOf(ctx context.Context) string {
	c, _ := ctx.Value(clientKey{}).(string)
	return c
}
