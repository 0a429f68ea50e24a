package site

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/site/login"
)

// openTunnel makes the way in for tunnel mode and returns the agent's
// arguments for it. The CLS's connection asks the login host for a reverse
// forward on its loopback, where any sshd binds one (GatewayPorts no, the
// default, binds every forward there): compute nodes cannot dial it
// directly, so each placeholder logs in to the login host with its own key
// and opens a direct-tcpip channel to that port. authorized_keys lets this
// key do little else: no shell, command, pty, agent or X11 forwarding,
// no TCP listening, and connections only to the forward's port. (It may
// still listen on a Unix-domain socket: OpenSSH's permitlisten does not
// cover them; docs/design/sites.md.)
func (s *Remote) openTunnel(ctx context.Context, r login.Runner) ([]string, error) {
	if s.DialCLS == nil {
		return nil, ErrNoEndpoint
	}
	t, ok := r.(login.Tunneler)
	if !ok {
		return nil, errors.New("tunnel: this connection to the login host cannot forward ports")
	}
	// Ask for the port we had, so placeholders started before a
	// reconnect find the CLS again; after a restart of the CLS, the port
	// this site's line on the login host permits (where they dial).
	if s.tunnel == 0 {
		if out, err := r.Run(ctx, tunnelLineCommand(s.JobName)); err == nil {
			s.tunnel = permittedPort(out)
		}
	}
	port, err := t.Forward(net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tunnel)), s.DialCLS)
	if err != nil && s.tunnel != 0 {
		port, err = s.reclaimPort(ctx, r, t)
	}
	if err != nil {
		return nil, err
	}
	s.tunnel = port
	// This connection's session holds the forward now: a cut that leaves
	// it behind on the login host is ended by the next connection.
	if _, err := r.Run(ctx, noteSessionCommand(path.Join(s.base, tunnelSessionFile))); err != nil {
		var ce *login.ConnError
		if errors.As(err, &ce) {
			return nil, err
		}
		s.log().Warn("tunnel: cannot note the login host's session for the forward; after a network cut that leaves it behind, the forward may move to another port", "site", s.Spec.Name, "err", err)
	}
	signer, err := ssh.ParsePrivateKey(s.Key)
	if err != nil {
		return nil, fmt.Errorf("placeholder key: %w", err)
	}
	line := TunnelKeyLine(signer.PublicKey(), port, s.JobName)
	if _, err := r.Run(ctx, authorizeCommand(line, s.JobName)); err != nil {
		return nil, fmt.Errorf("tunnel: cannot authorize the placeholder key on the login host: %w", err)
	}
	user, addr := loginOf(r, s.Spec)
	if host, _, err := net.SplitHostPort(addr); err == nil {
		out, err := r.Run(ctx, loginNodeCommand(host))
		var ce *login.ConnError
		if errors.As(err, &ce) {
			return nil, err
		}
		if at, names := loginPool(out); names > 1 {
			// Placeholders dial the name: each try lands on one of the
			// nodes, and only this one has the forward.
			s.log().Warn("tunnel: the login host's name has several addresses there (a pool of login nodes): the forward is only on the node this connection reached, and placeholders that land on another fail and try again until they reach it; give --ssh one login node's name",
				"site", s.Spec.Name, "name", host, "addresses", names, "reached", at)
		}
	}
	if t.HostKey() == nil {
		return nil, errors.New("tunnel: the login host's key is not known")
	}
	hk := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(t.HostKey())))
	return []string{"--via", user + "@" + addr, "--via-host-key", hk}, nil
}

// loginNodeCommand prints where the connection running it reached the
// login host ("at IP PORT", sshd's SSH_CONNECTION) and each address host
// has there ("name IP", getent ahosts: the login host's own view, which
// compute nodes share).
func loginNodeCommand(host string) string {
	return `set -- $SSH_CONNECTION; [ $# -ge 4 ] && echo "at $3 $4"; ` +
		`getent ahosts ` + Quote(host) + ` 2>/dev/null | while read -r a _; do echo "name $a"; done; true`
}

// loginPool reads loginNodeCommand's out: the address the connection
// reached the login host at (its sshd's; "" if unknown), and how many
// addresses of one family the login host's name has there: more than
// one is a pool of login nodes behind round-robin DNS (one IPv4 and one
// IPv6 address are one dual-stack node).
func loginPool(out []byte) (at string, names int) {
	seen := map[bool]map[string]bool{true: {}, false: {}} // by IPv4
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "at" && net.ParseIP(f[1]) != nil:
			at = net.ParseIP(f[1]).String()
		case len(f) == 2 && f[0] == "name" && net.ParseIP(f[1]) != nil:
			ip := net.ParseIP(f[1])
			seen[ip.To4() != nil][ip.String()] = true // ::ffff:a.b.c.d as a.b.c.d
		}
	}
	return at, max(len(seen[true]), len(seen[false]))
}

// TunnelKeyLine is the authorized_keys line on the login host for a tunnel
// site's placeholder key: restrict takes every right away, port-forwarding
// gives back forwarding, permitopen keeps only the CLS's port, permitlisten
// to port 1 (privileged: a user's sshd cannot bind it) leaves no TCP
// listening (it does not cover Unix-domain sockets),
// and the forced command runs nothing if a session is asked for anyway.
// The comment marks it as this site's.
func TunnelKeyLine(pub ssh.PublicKey, port int, jobName string) string {
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	return fmt.Sprintf(`restrict,port-forwarding,permitopen="127.0.0.1:%d",permitlisten="127.0.0.1:1",command="/bin/false" %s %s`, port, key, tunnelMark(jobName))
}

func tunnelMark(jobName string) string { return "mq-tunnel:" + jobName }

// tunnelLineCommand prints this site's line in authorized_keys, if any.
func tunnelLineCommand(jobName string) string {
	return `f="$HOME/.ssh/authorized_keys"; [ -f "$f" ] || exit 0; grep ' '` + Quote(tunnelMark(jobName)) + `'$' "$f"; true`
}

var permitOpen = regexp.MustCompile(`permitopen="127\.0\.0\.1:([0-9]{1,5})"`)

// permittedPort is the port a tunnel line permits (TunnelKeyLine), 0 if
// none is.
func permittedPort(line []byte) int {
	m := permitOpen.FindSubmatch(line)
	if m == nil {
		return 0
	}
	if port, err := strconv.Atoi(string(m[1])); err == nil && port > 0 && port < 65536 {
		return port
	}
	return 0
}

// authorizeCommand puts line in ~/.ssh/authorized_keys in place of this
// site's earlier one (unless it is there already), under a lock where
// flock(1) exists so two sites of one CLS do not lose each other's lines.
func authorizeCommand(line, jobName string) string {
	return `f="$HOME/.ssh/authorized_keys"; umask 077; mkdir -p "$HOME/.ssh" || exit 1; ` +
		`grep -q -x -F ` + Quote(line) + ` "$f" 2>/dev/null && exit 0; ` +
		`if command -v flock >/dev/null 2>&1; then exec 9>>"$HOME/.ssh/.mq-lock"; flock 9; fi; ` +
		`t="$f.mq-$$"; { [ -f "$f" ] && grep -v ' '` + Quote(tunnelMark(jobName)) + `'$' "$f"; printf '%s
' ` + Quote(line) + `; } >"$t" && mv -f "$t" "$f"`
}

// unauthorizeCommand removes this site's line from authorized_keys.
func unauthorizeCommand(jobName string) string {
	return `f="$HOME/.ssh/authorized_keys"; [ -f "$f" ] || exit 0; grep -q ' '` + Quote(tunnelMark(jobName)) + `'$' "$f" || exit 0; umask 077; ` +
		`if command -v flock >/dev/null 2>&1; then exec 9>>"$HOME/.ssh/.mq-lock"; flock 9; fi; ` +
		`t="$f.mq-$$"; { grep -v ' '` + Quote(tunnelMark(jobName)) + `'$' "$f"; true; } >"$t" && mv -f "$t" "$f"`
}

// reclaimPort is the forward on the tunnel's port, which a connection of
// this site already had: the login host refused it. A network cut can
// leave the login host's end of an earlier connection open (a firewall
// that reset only our end, or a CLS that gave up on a silent connection
// first), and its sshd session holds the forward until its TCP keepalive
// finds the peer gone, hours later with the defaults. The running
// placeholders dial that port, and their key's line permits only it. So
// the session that held it, as noted on the login host when its forward
// was made, is ended if it is still there (stale: not this connection's),
// and the port asked again; if it cannot be had, another is bound, and
// placeholders started from now on dial that.
func (s *Remote) reclaimPort(ctx context.Context, r login.Runner, t login.Tunneler) (int, error) {
	bind := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tunnel))
	out, err := r.Run(ctx, endStaleSessionCommand(path.Join(s.base, tunnelSessionFile)))
	if err == nil && strings.TrimSpace(string(out)) == staleEnded {
		s.log().Warn("tunnel: ended the login host's session that a network cut left holding the forward's port", "site", s.Spec.Name, "port", s.tunnel)
		// The session exits, and its listener closes, soon after the signal.
		for wait := 100 * time.Millisecond; ; wait *= 2 {
			port, ferr := t.Forward(bind, s.DialCLS)
			if ferr == nil || wait > 3*time.Second {
				if ferr == nil {
					return port, nil
				}
				break
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(wait):
			}
		}
	}
	s.log().Warn("tunnel: the forward's port is taken on the login host; placeholders started from now on dial another, and running ones cannot reach the CLS", "site", s.Spec.Name, "port", s.tunnel)
	return t.Forward("127.0.0.1:0", s.DialCLS)
}

// tunnelSessionFile, in the site's directory on the login host, names the
// sshd session that holds the tunnel's forward: its pid and start time.
// The start time is ps's lstart, or "proc TICKS" where ps cannot say it
// and /proc can (field 22 of /proc/PID/stat); each is compared only
// with one told the same way.
const tunnelSessionFile = "tunnel-session"

// staleEnded is what endStaleSessionCommand prints when it ended one.
const staleEnded = "ended"

// ourSession is shell functions. mq_session prints the pid of the sshd
// session process that runs the command (the parent of the command's
// shell, which withSession's exec put in place of the login shell), and
// fails where there is none. The session runs as the user: sshd's per
// connection process, sshd or sshd-session, which also holds the
// connection's forwards. mq_comm, mq_lstart and mq_start tell a
// process's command name and start time. Each asks ps first and falls
// back to Linux's /proc where ps says nothing (BusyBox's ps has no -p
// or lstart): fields 4 (the parent) and 22 (the start in clock ticks
// since boot) of /proc/PID/stat, counted from after the last ')', since
// field 2, the command's name, is in parentheses and may hold spaces
// and ')' itself.
const ourSession = `mq_stat() { mq_s=$(cat "/proc/$1/stat" 2>/dev/null) && set -- ${mq_s##*\)} && [ $# -ge 20 ] && echo "$2 ${20}"; }; ` +
	`mq_comm() { mq_c=$(ps -o comm= -p "$1" 2>/dev/null); [ -n "$mq_c" ] || mq_c=$(cat "/proc/$1/comm" 2>/dev/null); echo "$mq_c"; }; ` +
	`mq_lstart() { echo $(ps -o lstart= -p "$1" 2>/dev/null); }; ` +
	`mq_start() { mq_t=$(mq_stat "$1") && mq_t=${mq_t#* } && case "$mq_t" in ''|*[!0-9]*) false;; *) echo "$mq_t";; esac; }; ` +
	`mq_session() { p=$(ps -o ppid= -p $$ 2>/dev/null | tr -d ' '); ` +
	`case "$p" in ''|*[!0-9]*) p=$(mq_stat $$) && p=${p%% *};; esac; case "$p" in ''|*[!0-9]*) return 1;; esac; ` +
	`case "$(mq_comm "$p")" in sshd*) echo "$p";; *) false;; esac; }; `

// noteSessionCommand writes the pid and start time of this connection's
// sshd session to file, or nothing where they cannot be told.
func noteSessionCommand(file string) string {
	return ourSession + `umask 077; s=$(mq_session) || exit 0; st=$(mq_lstart "$s"); ` +
		`[ -n "$st" ] || { t=$(mq_start "$s") && st="proc $t"; } || exit 0; ` +
		`printf '%s\n%s\n' "$s" "$st" >` + Quote(file+".tmp") + ` && mv -f ` + Quote(file+".tmp") + ` ` + Quote(file)
}

// endStaleSessionCommand ends the sshd session file names if it is still
// the process noted (same pid, same start time told the same way, an
// sshd) and not this connection's, and then prints staleEnded. kill
// reaches only the user's own processes.
func endStaleSessionCommand(file string) string {
	return ourSession + `f=` + Quote(file) + `; [ -f "$f" ] || exit 0; { read -r pid; read -r st; } <"$f"; ` +
		`case "$pid" in ''|*[!0-9]*) exit 0;; esac; [ "$pid" != "$(mq_session)" ] || exit 0; ` +
		`case "$st" in "proc "*) now="proc $(mq_start "$pid")";; *) now=$(mq_lstart "$pid");; esac; ` +
		`[ -n "$now" ] && [ "$now" = "$(echo $st)" ] || exit 0; ` +
		`case "$(mq_comm "$pid")" in sshd*) kill "$pid" 2>/dev/null && echo ` + staleEnded + `;; esac; true`
}
