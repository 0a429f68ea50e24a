package site

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/protocol"
)

func TestValidateCLSAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr, connect string
		want          string // "" = valid
	}{
		{"cls.example.org", "", ""},
		{"cls.example.org:2222", "", ""},
		{"ws17", "", ""},
		{"10.0.0.5:443", "", ""},
		{"[fe80::1]:2222", "", ""},
		{"[fe80::1]", "", ""},
		{"fe80::1", "", ""},
		{"cls.example.org.", "", ""},
		{"cls.example.org:0", "", "the port must be 1..65535"},
		{"cls.example.org:http", "", "the port must be 1..65535"},
		{"cls.example.org:70000", "", "the port must be 1..65535"},
		{":2222", "", "want HOST or HOST:PORT"},
		{"host name", "", "want HOST or HOST:PORT"},
		{"host;reboot", "", "want HOST or HOST:PORT"},
		{"$(id)", "", "want HOST or HOST:PORT"},
		{"-oProxyCommand=x", "", "want HOST or HOST:PORT"},
		{"a:b:c]", "", "want HOST or HOST:PORT"},
		{strings.Repeat("a", 256), "", "longer than 255"},
		{"cls.example.org", Tunnel, "--cls-addr is for --connect direct"},
	} {
		s := protocol.SiteSpec{Name: "c", Type: Slurm, SSH: "u@h", CLSAddr: tc.addr, Connect: tc.connect}
		err := Validate(&s)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("--cls-addr %q: %v", tc.addr, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("--cls-addr %q: %v, want %q", tc.addr, err, tc.want)
		}
	}
	s := protocol.SiteSpec{Name: "l", Type: Local, CLSAddr: "x"}
	if err := Validate(&s); err == nil || !strings.Contains(err.Error(), "--cls-addr is only for remote sites") {
		t.Errorf("a local site with --cls-addr: %v", err)
	}
}

func TestCLSAddrFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ clsAddr, def, want string }{
		{"", "ws17:2222", "ws17:2222"},
		{"cls.example.org", "ws17:2222", "cls.example.org:2222"},
		{"cls.example.org:443", "ws17:2222", "cls.example.org:443"},
		{"fe80::1", "ws17:2222", "[fe80::1]:2222"},
		{"[fe80::1]:9", "ws17:2222", "[fe80::1]:9"},
		{"cls.example.org", "", ""}, // no SSH endpoint: refused elsewhere
	} {
		if got := CLSAddrFor(protocol.SiteSpec{CLSAddr: tc.clsAddr}, tc.def); got != tc.want {
			t.Errorf("CLSAddrFor(%q, %q) = %q, want %q", tc.clsAddr, tc.def, got, tc.want)
		}
	}
}

// The batch script tells placeholders the address the site gives for the
// CLS, with the CLS's port when it names none; cls site set changes it for
// placeholders submitted from then on, on the open connection.
func TestScriptDialsCLSAddr(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "mqagent")
	os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o755)
	home := t.TempDir()
	open := func(clsAddr string) *Remote {
		spec := protocol.SiteSpec{Name: "s", Type: Slurm, SSH: "u@h", CLSAddr: clsAddr}
		if err := Validate(&spec); err != nil {
			t.Fatal(err)
		}
		return &Remote{Spec: spec, Batch: ForType(spec.Type), CLSAddr: "ws17:2222", JobName: "mq-s-x", Dir: ".mq-sites/x",
			Agent: func(string, string) (string, error) { return agent, nil },
			Dial:  func(context.Context) (login.Runner, error) { return shRunner{home}, nil },
		}
	}
	dials := func(r *Remote) string {
		t.Helper()
		if _, err := r.runner(context.Background()); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(r.script)
		if err != nil {
			t.Fatal(err)
		}
		_, after, ok := strings.Cut(string(b), "--cls ")
		if !ok {
			t.Fatalf("no --cls in the script:\n%s", b)
		}
		return strings.Trim(strings.Fields(after)[0], "'")
	}
	if got := dials(open("")); got != "ws17:2222" {
		t.Errorf("no --cls-addr: placeholders dial %s, want the CLS's own ws17:2222", got)
	}
	r := open("cls.example.org")
	if got := dials(r); got != "cls.example.org:2222" {
		t.Errorf("--cls-addr cls.example.org: placeholders dial %s", got)
	}
	if !r.Retarget(open("gw.example.org:443")) {
		t.Fatal("not retargeted")
	}
	if got := dials(r); got != "gw.example.org:443" {
		t.Errorf("after cls site set --cls-addr gw.example.org:443: placeholders dial %s", got)
	}
}
