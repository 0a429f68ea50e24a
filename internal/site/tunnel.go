package site

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Tunneler is a Runner that can carry a tunnel: SSH.
type Tunneler interface {
	// Forward listens on bind on the login host and joins each
	// connection made there to dial; it returns the port bound.
	Forward(bind string, dial func() (net.Conn, error)) (int, error)
	// HostKey is the key the login host showed (and known_hosts vouched for).
	HostKey() ssh.PublicKey
}

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
func (s *Remote) openTunnel(ctx context.Context, r Runner) ([]string, error) {
	if s.DialCLS == nil {
		return nil, ErrNoEndpoint
	}
	t, ok := r.(Tunneler)
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
		port, err = t.Forward("127.0.0.1:0", s.DialCLS)
	}
	if err != nil {
		return nil, err
	}
	s.tunnel = port
	signer, err := ssh.ParsePrivateKey(s.Key)
	if err != nil {
		return nil, fmt.Errorf("placeholder key: %w", err)
	}
	line := TunnelKeyLine(signer.PublicKey(), port, s.JobName)
	if _, err := r.Run(ctx, authorizeCommand(line, s.JobName)); err != nil {
		return nil, fmt.Errorf("tunnel: cannot authorize the placeholder key on the login host: %w", err)
	}
	user, login, _ := ParseSSH(s.Spec.SSH)
	hk := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(t.HostKey())))
	return []string{"--via", user + "@" + login, "--via-host-key", hk}, nil
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
