// Package logguard keeps what peers send from flooding or forging the
// CLS's log: Text bounds and escapes one peer-supplied string, and a
// Limiter turns a stream of like events (refused logins from one address,
// refused requests from one key) into one line now and one line with the
// count later. A Gate spaces a warning repeated for hours to one a minute.
package logguard

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mq-hpc/mq/protocol"
)

// MaxText is how many bytes of a peer-supplied string a log line keeps.
const MaxText = 64

// Text returns s fit for a log line: at most MaxText bytes of it (cut at a
// rune, with the full length said), escaped by protocol.Printable so no
// control character or invalid UTF-8 reaches the file. An SSH user name is
// whatever the client sends (200 KB was seen, once per refused key).
func Text(s string) string { return Clip(s, MaxText) }

// Clip is Text with another bound, for longer strings that may hold
// peer-supplied parts (an error from the SSH handshake).
func Clip(s string, n int) string {
	if len(s) <= n {
		return protocol.Printable(s)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s...[cut, %d bytes]", protocol.Printable(s[:cut]), len(s))
}

// DefaultWindow is how long a Limiter counts repeats of an event before it
// logs their number.
const DefaultWindow = time.Minute

// maxKeys bounds the events a Limiter counts at once; repeats of others
// are counted together under overflowKey.
const maxKeys = 4096

const overflowKey = "\x00other"

// Limiter logs the first event of each key in a window and counts the
// rest; when the window ends it logs one line with their count ("more"),
// if there were any. The zero Limiter logs nothing; set Log.
type Limiter struct {
	Log    *slog.Logger
	Window time.Duration // 0: DefaultWindow

	mu    sync.Mutex
	keys  map[string]*event
	timer *time.Timer
}

type event struct {
	level slog.Level
	msg   string
	args  []any
	start time.Time
	more  int
}

func (l *Limiter) window() time.Duration {
	if l.Window > 0 {
		return l.Window
	}
	return DefaultWindow
}

// Warn logs msg with args at warning level unless an event with key was
// logged within the window; then it is only counted. Args must be
// bounded already (Text).
func (l *Limiter) Warn(key, msg string, args ...any) { l.log(slog.LevelWarn, key, msg, args) }

// Error is Warn at error level.
func (l *Limiter) Error(key, msg string, args ...any) { l.log(slog.LevelError, key, msg, args) }

// Info is Warn at info level.
func (l *Limiter) Info(key, msg string, args ...any) { l.log(slog.LevelInfo, key, msg, args) }

func (l *Limiter) log(level slog.Level, key, msg string, args []any) {
	if l == nil || l.Log == nil {
		return
	}
	now := time.Now()
	l.mu.Lock()
	if l.keys == nil {
		l.keys = map[string]*event{}
	}
	e := l.keys[key]
	if e == nil && len(l.keys) >= maxKeys {
		key = overflowKey
		if e = l.keys[key]; e == nil {
			e = &event{level: slog.LevelWarn, msg: "more events of other kinds or sources than can be told apart", start: now}
			l.keys[key] = e
		}
	}
	if e != nil && now.Sub(e.start) < l.window() {
		e.more++
		l.armLocked()
		l.mu.Unlock()
		return
	}
	var prev *event
	if e != nil && e.more > 0 {
		prev = e
	}
	l.keys[key] = &event{level: level, msg: msg, args: args, start: now}
	l.armLocked()
	l.mu.Unlock()
	if prev != nil {
		l.summary(prev)
	}
	l.Log.Log(context.Background(), level, msg, args...)
}

// armLocked makes sure a flush comes one window from now.
func (l *Limiter) armLocked() {
	if l.timer == nil {
		l.timer = time.AfterFunc(l.window(), l.flushExpired)
	}
}

func (l *Limiter) flushExpired() {
	l.mu.Lock()
	l.timer = nil
	var done []*event
	now := time.Now()
	for k, e := range l.keys {
		if now.Sub(e.start) >= l.window() {
			delete(l.keys, k)
			if e.more > 0 {
				done = append(done, e)
			}
		}
	}
	if len(l.keys) > 0 {
		l.timer = time.AfterFunc(l.window(), l.flushExpired)
	}
	l.mu.Unlock()
	for _, e := range done {
		l.summary(e)
	}
}

// Flush logs the counts of every window now, ended or not, and forgets
// them (at shutdown, and in tests).
func (l *Limiter) Flush() {
	if l == nil {
		return
	}
	l.mu.Lock()
	var done []*event
	for _, e := range l.keys {
		if e.more > 0 {
			done = append(done, e)
		}
	}
	l.keys = nil
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
	for _, e := range done {
		l.summary(e)
	}
}

func (l *Limiter) summary(e *event) {
	args := append(append([]any(nil), e.args...), "more", e.more, "within", time.Since(e.start).Round(time.Second).String())
	l.Log.Log(context.Background(), e.level, e.msg+" (repeated)", args...)
}

// Gate passes a warning at once and then at most one a minute: a wait on
// a CLS that cannot commit (a full disk) may last hours, and a line per
// retry would be one every few seconds from every placeholder.
type Gate struct{ next time.Time }

// Open says whether a warning at now passes.
func (g *Gate) Open(now time.Time) bool {
	if now.Before(g.next) {
		return false
	}
	g.next = now.Add(time.Minute)
	return true
}
