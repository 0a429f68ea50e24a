package clscmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

const testSSHConfig = `# as users keep them
Host perl
  HostName perlmutter.example.org
  User alice
  Port 2222
  IdentityFile ~/.ssh/missing
  IdentityFile %d/.ssh/nersc
  ProxyJump gw
  UserKnownHostsFile ~/.ssh/kh_%h
Host gw
  HostName gateway.example.org
  User bob
Host viaexplicit
  ProxyJump carol@gw:2200
Host pc
  ProxyCommand ssh -W %h:%p gw
Host two
  ProxyJump a,b
Host chained
  ProxyJump perl
Host nocheck
  UserKnownHostsFile /dev/null
Host aliased
  HostKeyAlias other
Host badtoken
  IdentityFile ~/.ssh/id_%C
Host *
  User dave
`

// sshHome makes a home with testSSHConfig as its ~/.ssh/config and a
// key file ~/.ssh/nersc.
func sshHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"config": testSSHConfig, "nersc": "key"} {
		if err := os.WriteFile(filepath.Join(home, ".ssh", name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// --ssh NAME without a user is read as ssh NAME would read the user's
// ssh config: what mq can do is taken, what it cannot is an error.
func TestSSHConfigResolve(t *testing.T) {
	home := sshHome(t)
	cfg, err := loadSSHConfig(home, "me", filepath.Join(home, ".ssh", "config"), filepath.Join(home, "no-system-config"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want sshHost
		err  string
	}{
		{"perl", sshHost{SSH: "alice@perlmutter.example.org:2222", Jump: "bob@gateway.example.org:22",
			Key: filepath.Join(home, ".ssh", "nersc"), KnownHosts: filepath.Join(home, ".ssh", "kh_perlmutter.example.org")}, ""},
		{"perl:2200", sshHost{SSH: "alice@perlmutter.example.org:2200", Jump: "bob@gateway.example.org:22",
			Key: filepath.Join(home, ".ssh", "nersc"), KnownHosts: filepath.Join(home, ".ssh", "kh_perlmutter.example.org")}, ""},
		{"plain.example.org", sshHost{SSH: "dave@plain.example.org:22"}, ""},
		{"viaexplicit", sshHost{SSH: "dave@viaexplicit:22", Jump: "carol@gateway.example.org:2200"}, ""},
		{"pc", sshHost{}, "ProxyCommand"},
		{"two", sshHost{}, "one jump host"},
		{"chained", sshHost{}, "ProxyJump of its own"},
		{"nocheck", sshHost{}, "mq checks the login host's key"},
		{"aliased", sshHost{}, "HostKeyAlias"},
		{"badtoken", sshHost{}, "token %C"},
		{"a b", sshHost{}, "want a host name"},
		{"x\x1b[2J", sshHost{}, "want a host name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cfg.resolve(tc.name)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("resolve(%q): %v", tc.name, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("resolve(%q) = %+v, %v; want an error with %q", tc.name, got, err, tc.err)
			case got != tc.want:
				t.Errorf("resolve(%q) = %+v; want %+v", tc.name, got, tc.want)
			}
		})
	}
}

// An ssh config others could write is refused, as ssh refuses it.
func TestSSHConfigTrusted(t *testing.T) {
	home := sshHome(t)
	p := filepath.Join(home, ".ssh", "config")
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSSHConfig(home, "me", p); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("a config writable by others: %v", err)
	}
}

// cls site add --ssh NAME sends what the ssh config says, keeps what the
// command line gives, and says what it took.
func TestSiteAddFromSSHConfig(t *testing.T) {
	home := sshHome(t)
	t.Setenv("HOME", home)
	for _, tc := range []struct {
		args []string
		want protocol.SiteSpec
	}{
		{[]string{"--ssh", "perl"}, protocol.SiteSpec{SSH: "alice@perlmutter.example.org:2222", Jump: "bob@gateway.example.org:22",
			Key: filepath.Join(home, ".ssh", "nersc"), KnownHosts: filepath.Join(home, ".ssh", "kh_perlmutter.example.org")}},
		{[]string{"--ssh", "perl", "--jump", "eve@other:22", "--key", filepath.Join(home, ".ssh", "config")}, protocol.SiteSpec{
			SSH: "alice@perlmutter.example.org:2222", Jump: "eve@other:22", Key: filepath.Join(home, ".ssh", "config"),
			KnownHosts: filepath.Join(home, ".ssh", "kh_perlmutter.example.org")}},
		{[]string{"--ssh", "zed@perl:22"}, protocol.SiteSpec{SSH: "zed@perl:22"}}, // a user given: the config is not read
	} {
		var sent protocol.SiteSpec
		replies := map[string]clitest.Reply{protocol.OpSiteAdd.Name: {Body: protocol.SiteInfo{}, Seen: func(b json.RawMessage) { json.Unmarshal(b, &sent) }}}
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd, Dial: clitest.Dial(replies)}
		args := append([]string{"cls", "site", "add", "c", "--type", "slurm"}, tc.args...)
		if code := mqcli.Run(context.Background(), Cls(env), args); code != 0 {
			t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		if sent.SSH != tc.want.SSH || sent.Jump != tc.want.Jump || sent.Key != tc.want.Key || sent.KnownHosts != tc.want.KnownHosts {
			t.Errorf("%s sent ssh %q jump %q key %q known-hosts %q; want %+v", strings.Join(args, " "), sent.SSH, sent.Jump, sent.Key, sent.KnownHosts, tc.want)
		}
		if fromConfig := strings.Contains(errOut.String(), "from your ssh config"); fromConfig != !strings.Contains(tc.args[1], "@") {
			t.Errorf("%s said %q", strings.Join(args, " "), errOut.String())
		}
	}
}

// FuzzSSHConfigResolve: whatever the ssh config holds and whatever --ssh
// names, resolving it does not panic, an error is one line, and what it
// gives has a user and no control character.
func FuzzSSHConfigResolve(f *testing.F) {
	f.Add(testSSHConfig, "perl")
	f.Add("Host *\n  HostName %h.example.org\n  IdentityFile %d/%u/%r/%p/%n/%%\n", "x:2")
	f.Add("Match exec true\n", "a")
	f.Add("Host a\n ProxyJump b@c:0\n", "a")
	f.Fuzz(func(t *testing.T, config, name string) {
		if strings.Contains(strings.ToLower(config), "include") {
			// Include reads the files it names, as ssh does: /proc's
			// would block, any as long as they do.
			t.Skip()
		}
		home := t.TempDir()
		p := filepath.Join(home, "config")
		if err := os.WriteFile(p, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadSSHConfig(home, "me", p)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("load: %q", err)
			}
			return
		}
		h, err := cfg.resolve(name)
		if err != nil {
			return // the one-line rule applies after Usagef, which quotes
		}
		if !strings.Contains(h.SSH, "@") {
			t.Fatalf("resolve(%q) = %+v: no user", name, h)
		}
	})
}
