package site

import (
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// --openssh's destinations: what ssh takes as one, a host of the user's
// ssh config included, and nothing it would read as an option or that a
// shell or ssh's option parser would split.
func TestParseDest(t *testing.T) {
	for _, c := range []struct {
		in, user, host string
		port           int
	}{
		{"perlmutter", "", "perlmutter", 0},
		{"alice@login.example.org", "alice", "login.example.org", 0},
		{"hpc:2222", "", "hpc", 2222},
		{"u@[::1]:22", "u", "::1", 22},
		{"u@[fe80::1]", "u", "fe80::1", 0},
		{"u@fe80::1", "u", "fe80::1", 0},
	} {
		user, host, port, err := ParseDest("ssh", c.in)
		if err != nil || user != c.user || host != c.host || port != c.port {
			t.Errorf("ParseDest(%q) = %q, %q, %d, %v; want %q, %q, %d", c.in, user, host, port, err, c.user, c.host, c.port)
		}
	}
	for _, bad := range []string{"", "@h", "-oProxyCommand=x", "u@-h", "-u@h", "h:0", "h:99999", "h:x", "a b", "h\n", "h;x", "u:p@h", `h"`, "h'", "h%n", "u@h@g", "h/x"} {
		if _, _, _, err := ParseDest("ssh", bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseDest(%q) = %v; want one line refusing it", bad, err)
		}
	}
	for _, s := range []protocol.SiteSpec{
		{Name: "a", Type: Slurm, SSH: "perlmutter", OpenSSH: true},
		{Name: "a", Type: Slurm, SSH: "hpc:2222", Jump: "gw", OpenSSH: true},
	} {
		if err := Validate(&s); err != nil {
			t.Errorf("Validate(%+v): %v", s, err)
		}
	}
	for _, s := range []protocol.SiteSpec{
		{Name: "a", Type: Slurm, SSH: "perlmutter"}, // a name of the ssh config is cls site add's to read
		{Name: "a", Type: Slurm, SSH: "-oProxyCommand=x", OpenSSH: true},
		{Name: "a", Type: Slurm, SSH: "h", Jump: "-J", OpenSSH: true},
		{Name: "a", Type: Slurm, SSH: "h", Key: `/k"ey`, OpenSSH: true},
		{Name: "a", Type: Local, SSH: "h", OpenSSH: true},
	} {
		if err := Validate(&s); err == nil {
			t.Errorf("Validate(%+v) accepted it", s)
		}
	}
}

// FuzzParseDest: a destination ParseDest accepts is one argument to ssh
// that it cannot read as an option, and parses again the same.
func FuzzParseDest(f *testing.F) {
	for _, s := range []string{"hpc", "u@h:22", "u@[::1]:2222", "-x", "a b", "u@h@g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		user, host, port, err := ParseDest("ssh", s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of two lines: %q", err)
			}
			return
		}
		cfg := OpenSSHFor(protocol.SiteSpec{SSH: s, OpenSSH: true}, "/d")
		if strings.HasPrefix(cfg.Dest, "-") || strings.ContainsFunc(cfg.Dest, func(r rune) bool { return r <= ' ' || r == '"' || r == '\'' || r == 0x7f }) {
			t.Fatalf("%q: destination %q", s, cfg.Dest)
		}
		if cfg.Port != port || !strings.HasSuffix(cfg.Dest, host) || (user != "" && !strings.HasPrefix(cfg.Dest, user+"@")) {
			t.Fatalf("%q: config %+v from %q %q %d", s, cfg, user, host, port)
		}
	})
}
