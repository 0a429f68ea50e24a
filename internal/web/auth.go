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
	"strings"
)

// Who may read the dashboard. Every request carries the token: in an
// Authorization: Bearer header (scripts, Prometheus), or in a session
// cookie a browser got by visiting a page once with ?token= (then
// redirected to the page without it, as Jupyter does). The cookie holds
// no token: a random session id and its HMAC under the token, so the
// dashboard keeps no session state, a session outlives a restart of the
// CLS, and each session is a client of its own for the stream limits.

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
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenOK(tok) {
		// Scripts and scrapers: one client per address.
		return "bearer " + remoteIP(r), true
	}
	name := sessionCookie(r.Host)
	if c, err := r.Cookie(name); err == nil {
		if id, ok := s.session(c.Value); ok {
			return "session " + id, true
		}
	}
	if q := r.URL.Query(); q.Has("token") && s.tokenOK(q.Get("token")) {
		http.SetCookie(w, &http.Cookie{Name: name, Value: s.newSession(), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q.Del("token")
		// A path of this server's only: "//host/..." would send the
		// browser elsewhere.
		u := url.URL{Path: "/" + strings.TrimLeft(r.URL.Path, "/"), RawQuery: q.Encode()}
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return "", false
	}
	h := w.Header()
	h.Set("WWW-Authenticate", `Bearer realm="mq"`)
	// A peer without the token keeps no connection open between requests.
	h.Set("Connection", "close")
	http.Error(w, "a token is required (MQ_HOME/http.token; cls dashboard url prints the address with it): Authorization: Bearer TOKEN, or ?token=TOKEN once in a browser", http.StatusUnauthorized)
	return "", false
}

func remoteIP(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// clientKey is the context key of a request's client.
type clientKey struct{}

func clientOf(ctx context.Context) string {
	c, _ := ctx.Value(clientKey{}).(string)
	return c
}
