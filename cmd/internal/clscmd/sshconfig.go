package clscmd

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/kevinburke/ssh_config"

	"github.com/mq-hpc/mq/internal/sshkey"
)

// sshHost is how cls site add reaches a login host, as --ssh, --jump,
// --key and --known-hosts say it.
type sshHost struct {
	SSH, Jump, Key, KnownHosts string
}

// sshConfig is the OpenSSH client configuration of this host: the user's
// file, then the system's, the first value of a keyword winning, as ssh
// reads them.
type sshConfig struct {
	files     []*ssh_config.Config
	home      string
	localUser string
}

// sshConfigFile is the rule for an ssh_config file: ssh itself refuses
// one that others could write, which could name their own host.
var sshConfigFile = sshkey.Trust{What: "ssh config file", Risk: "send your logins to a host of theirs"}

// loadSSHConfig reads paths (missing ones are skipped) for the user
// localUser whose home is home.
func loadSSHConfig(home, localUser string, paths ...string) (*sshConfig, error) {
	c := &sshConfig{home: home, localUser: localUser}
	for _, p := range paths {
		f, err := sshkey.OpenTrusted(p, sshConfigFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cfg, err := ssh_config.Decode(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		c.files = append(c.files, cfg)
	}
	return c, nil
}

// get is the first value of key for host alias, "" if none.
func (c *sshConfig) get(alias, key string) (string, error) {
	for _, f := range c.files {
		v, err := f.Get(alias, key)
		if err != nil {
			return "", err
		}
		if v != "" {
			return v, nil
		}
	}
	return "", nil
}

// all is every value of key for host alias, in the order ssh tries them.
func (c *sshConfig) all(alias, key string) ([]string, error) {
	var out []string
	for _, f := range c.files {
		v, err := f.GetAll(alias, key)
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	return out, nil
}

// resolve reads --ssh NAME[:PORT], given without a user, as ssh NAME
// would: HostName, User (default: the local user), Port, the first
// IdentityFile that exists, ProxyJump (one hop; its own name resolved
// the same way) and UserKnownHostsFile. What mq cannot do as ssh would
// (a ProxyCommand, several jumps, a HostKeyAlias, no host key checking)
// is an error saying so.
func (c *sshConfig) resolve(name string) (sshHost, error) {
	alias, port, err := splitAlias(name)
	if err != nil {
		return sshHost{}, err
	}
	login, err := c.host(alias, port)
	if err != nil {
		return sshHost{}, err
	}
	var h sshHost
	h.SSH = login.user + "@" + net.JoinHostPort(login.host, login.port)
	jump, err := c.get(alias, "ProxyJump")
	if err != nil {
		return sshHost{}, err
	}
	if jump != "" && !strings.EqualFold(jump, "none") {
		if strings.Contains(jump, ",") {
			return sshHost{}, fmt.Errorf("ssh config: %s has ProxyJump %s: mq takes one jump host (--jump)", alias, jump)
		}
		ju, jhost, _ := strings.Cut(jump, "@")
		if jhost == "" {
			ju, jhost = "", jump
		}
		jalias, jport, err := splitAlias(jhost)
		if err != nil {
			return sshHost{}, fmt.Errorf("ssh config: %s's ProxyJump: %w", alias, err)
		}
		j, err := c.host(jalias, jport)
		if err != nil {
			return sshHost{}, err
		}
		if next, _ := c.get(jalias, "ProxyJump"); next != "" && !strings.EqualFold(next, "none") {
			return sshHost{}, fmt.Errorf("ssh config: %s's jump host %s has a ProxyJump of its own: mq takes one jump host (--jump)", alias, jalias)
		}
		if ju != "" {
			j.user = ju
		}
		h.Jump = j.user + "@" + net.JoinHostPort(j.host, j.port)
	}
	ids, err := c.all(alias, "IdentityFile")
	if err != nil {
		return sshHost{}, err
	}
	for _, id := range ids {
		p, err := c.expand(id, login)
		if err != nil {
			return sshHost{}, fmt.Errorf("ssh config: %s's IdentityFile %s: %w", alias, id, err)
		}
		if _, err := os.Stat(p); err == nil {
			h.Key = p
			break
		}
	}
	if kh, err := c.get(alias, "UserKnownHostsFile"); err != nil {
		return sshHost{}, err
	} else if kh != "" {
		first := strings.Fields(kh)[0]
		p, err := c.expand(first, login)
		if err != nil {
			return sshHost{}, fmt.Errorf("ssh config: %s's UserKnownHostsFile %s: %w", alias, first, err)
		}
		if p == os.DevNull || strings.EqualFold(first, "none") {
			return sshHost{}, fmt.Errorf("ssh config: %s's UserKnownHostsFile is %s: mq checks the login host's key; give --known-hosts", alias, first)
		}
		h.KnownHosts = p
	}
	return h, nil
}

// configHost is a host as ssh_config makes it of a name.
type configHost struct {
	alias, host, port, user string
}

func (c *sshConfig) host(alias, port string) (configHost, error) {
	h := configHost{alias: alias, host: alias, port: port, user: c.localUser}
	for _, k := range []string{"ProxyCommand", "HostKeyAlias"} {
		v, err := c.get(alias, k)
		if err != nil {
			return h, fmt.Errorf("ssh config: %w", err)
		}
		if v != "" && !strings.EqualFold(v, "none") {
			return h, fmt.Errorf("ssh config: %s has %s %s, which mq cannot do as ssh does: give --ssh USER@HOST[:PORT] (and --jump)", alias, k, v)
		}
	}
	if v, err := c.get(alias, "HostName"); err != nil {
		return h, fmt.Errorf("ssh config: %w", err)
	} else if v != "" {
		h.host = strings.ReplaceAll(strings.ReplaceAll(v, "%h", alias), "%%", "%")
	}
	if v, err := c.get(alias, "User"); err != nil {
		return h, fmt.Errorf("ssh config: %w", err)
	} else if v != "" {
		h.user = v
	}
	if h.port == "" {
		v, err := c.get(alias, "Port")
		if err != nil {
			return h, fmt.Errorf("ssh config: %w", err)
		}
		h.port = v
	}
	if h.port == "" {
		h.port = "22"
	}
	if h.user == "" {
		return h, fmt.Errorf("ssh config: no User for %s and no local user name: give --ssh USER@%s", alias, alias)
	}
	return h, nil
}

// expand is a path of ssh_config with its tokens and ~ replaced, as ssh
// expands IdentityFile and UserKnownHostsFile; a relative one is taken
// in the home.
func (c *sshConfig) expand(p string, h configHost) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = c.home + p[1:]
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			b.WriteByte(p[i])
			continue
		}
		if i++; i == len(p) {
			return "", errors.New("a lone % at its end")
		}
		switch p[i] {
		case '%':
			b.WriteByte('%')
		case 'd':
			b.WriteString(c.home)
		case 'u':
			b.WriteString(c.localUser)
		case 'h':
			b.WriteString(h.host)
		case 'n':
			b.WriteString(h.alias)
		case 'r':
			b.WriteString(h.user)
		case 'p':
			b.WriteString(h.port)
		default:
			return "", fmt.Errorf("token %%%c is not one mq expands (%%d %%u %%h %%n %%r %%p %%%%)", p[i])
		}
	}
	if !filepath.IsAbs(b.String()) {
		// Relative to the home: the CLS reads it from another directory.
		return filepath.Join(c.home, b.String()), nil
	}
	return b.String(), nil
}

// splitAlias splits NAME[:PORT].
func splitAlias(s string) (alias, port string, err error) {
	alias = s
	if h, p, err := net.SplitHostPort(s); err == nil {
		alias, port = h, p
	}
	if alias == "" || strings.ContainsAny(alias, " /@") || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", "", fmt.Errorf("%q: want a host name from your ssh config, or USER@HOST[:PORT]", s)
	}
	return alias, port, nil
}

// userSSHConfig is this user's OpenSSH client configuration: their
// ~/.ssh/config, then /etc/ssh/ssh_config.
func userSSHConfig() (*sshConfig, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, err
	}
	var name string
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return loadSSHConfig(home, name, filepath.Join(home, ".ssh", "config"), "/etc/ssh/ssh_config")
}
