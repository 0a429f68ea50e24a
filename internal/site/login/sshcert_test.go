package login

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/mq-hpc/mq/internal/sshkey"
)

// certLogin is an in-process login host that accepts only OpenSSH user
// certificates signed by its CA, for user "u", as a site whose users
// get short-lived certificates (sshproxy, Vault, step-ca) does.
type certLogin struct {
	addr, knownHosts string
	ca               ssh.Signer
	serial           atomic.Uint64 // of the last certificate accepted
}

func startCertLogin(t *testing.T) *certLogin {
	t.Helper()
	dir := t.TempDir()
	hostSigner, ca := newSigner(t), newSigner(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	l := &certLogin{addr: ln.Addr().String(), knownHosts: filepath.Join(dir, "known_hosts"), ca: ca}
	line := "[127.0.0.1]:" + portOf(l.addr) + " " + string(ssh.MarshalAuthorizedKey(hostSigner.PublicKey()))
	if err := os.WriteFile(l.knownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	checker := &ssh.CertChecker{IsUserAuthority: func(auth ssh.PublicKey) bool {
		return bytes.Equal(auth.Marshal(), ca.PublicKey().Marshal())
	}}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(c ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		// No UserKeyFallback: a plain key is refused.
		p, err := checker.Authenticate(c, k)
		if err == nil {
			l.serial.Store(k.(*ssh.Certificate).Serial)
		}
		return p, err
	}}
	cfg.AddHostKey(hostSigner)
	go serveLoginOnly(ln, cfg)
	return l
}

// serveLoginOnly serves SSH logins on ln with cfg until ln is closed,
// and nothing else: every channel is refused.
func serveLoginOnly(ln net.Listener, cfg *ssh.ServerConfig) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			sc, chans, reqs, err := ssh.NewServerConn(nc, cfg)
			if err != nil {
				nc.Close()
				return
			}
			defer sc.Close()
			go ssh.DiscardRequests(reqs)
			for nch := range chans {
				nch.Reject(ssh.Prohibited, "login only")
			}
		}()
	}
}

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeKey writes a new unencrypted private key of kind ("" for
// ed25519, "rsa", "ecdsa") to path (mode 0600) and returns it.
func writeKey(t *testing.T, path, kind string) crypto.Signer {
	t.Helper()
	var priv crypto.Signer
	var err error
	switch kind {
	case "":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case "rsa":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ecdsa":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return priv
}

// cert is a user certificate for user "u" and key, signed by ca, valid
// until validBefore (a Unix time, or ssh.CertTimeInfinity).
func cert(t *testing.T, ca ssh.Signer, key ssh.PublicKey, serial, validBefore uint64) *ssh.Certificate {
	t.Helper()
	c := &ssh.Certificate{
		Key: key, Serial: serial, CertType: ssh.UserCert, KeyId: "test",
		ValidPrincipals: []string{"u"}, ValidBefore: validBefore,
	}
	if err := c.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return c
}

// writeFile writes data to path with exactly mode, whatever the umask.
func writeFile(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func pubOf(t *testing.T, priv crypto.Signer) ssh.PublicKey {
	t.Helper()
	pk, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

// noAgent makes DialSSH see no ssh-agent and no default keys but those a
// test puts in home, whatever the machine running the tests has.
func noAgent(t *testing.T) (home string) {
	home = t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("SSH_AUTH_SOCK", "")
	return home
}

// dialCert dials l with keyFile ("" for the agent and default keys).
func (l *certLogin) dial(keyFile string) error {
	s, err := DialSSH(context.Background(), SSHConfig{User: "u", Addr: l.addr, KeyFile: keyFile, KnownHosts: l.knownHosts, Timeout: time.Minute})
	if err == nil {
		s.Close()
	}
	return err
}

// TestSSHCertLogin: a login host that accepts only certificates is
// logged in to with a key's certificate, FILE-cert.pub, beside the key
// file (--key, or a default key). A certificate that cannot be used (none
// there, expired, another key's, one others could write, not one at all)
// leaves the key alone offered, which such a host refuses: errAuth,
// saying why the certificate was skipped.
func TestSSHCertLogin(t *testing.T) {
	l := startCertLogin(t)
	hour := uint64(time.Now().Add(time.Hour).Unix())
	expiredAt := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	cases := []struct {
		name string
		// home: the key is ~/.ssh/id_KIND, found without --key.
		home bool
		kind string // of the key: "" (ed25519), "rsa", "ecdsa"
		// cert is the certificate file's content for the key's public
		// key; nil writes none.
		cert func(pub ssh.PublicKey) []byte
		mode os.FileMode
		want []string // in the error; nil: logged in
	}{
		{name: "key and cert", cert: func(pub ssh.PublicKey) []byte {
			return ssh.MarshalAuthorizedKey(cert(t, l.ca, pub, 7, hour))
		}, mode: 0o644},
		{name: "default key and cert", home: true, cert: func(pub ssh.PublicKey) []byte {
			return ssh.MarshalAuthorizedKey(cert(t, l.ca, pub, 7, hour))
		}, mode: 0o644},
		{name: "rsa key and cert", kind: "rsa", cert: func(pub ssh.PublicKey) []byte {
			return ssh.MarshalAuthorizedKey(cert(t, l.ca, pub, 7, hour))
		}, mode: 0o644},
		{name: "default ecdsa key and cert", home: true, kind: "ecdsa", cert: func(pub ssh.PublicKey) []byte {
			return ssh.MarshalAuthorizedKey(cert(t, l.ca, pub, 7, hour))
		}, mode: 0o644},
		{name: "default rsa key and cert", home: true, kind: "rsa", cert: func(pub ssh.PublicKey) []byte {
			return ssh.MarshalAuthorizedKey(cert(t, l.ca, pub, 7, hour))
		}, mode: 0o644},
		{name: "cert that never expires", cert: func(pub ssh.PublicKey) []byte {
			return ssh.MarshalAuthorizedKey(cert(t, l.ca, pub, 7, ssh.CertTimeInfinity))
		}, mode: 0o600},
		{name: "no cert file", want: []string{}},
		{name: "default key, no cert file", home: true, want: []string{}},
		{name: "expired", cert: func(pub ssh.PublicKey) []byte {
			return ssh.MarshalAuthorizedKey(cert(t, l.ca, pub, 7, uint64(expiredAt.Unix())))
		}, mode: 0o644, want: []string{"-cert.pub expired at " + expiredAt.Format(time.RFC3339)}},
		{name: "default key, expired", home: true, cert: func(pub ssh.PublicKey) []byte {
			return ssh.MarshalAuthorizedKey(cert(t, l.ca, pub, 7, uint64(expiredAt.Unix())))
		}, mode: 0o644, want: []string{".ssh/id_ed25519-cert.pub expired at " + expiredAt.Format(time.RFC3339)}},
		{name: "another key's cert", cert: func(ssh.PublicKey) []byte {
			return ssh.MarshalAuthorizedKey(cert(t, l.ca, newSigner(t).PublicKey(), 7, hour))
		}, mode: 0o644, want: []string{"-cert.pub is for another key"}},
		{name: "writable by others", cert: func(pub ssh.PublicKey) []byte {
			return ssh.MarshalAuthorizedKey(cert(t, l.ca, pub, 7, hour))
		}, mode: 0o666, want: []string{"-cert.pub is writable by others (mode 0666)", "chmod go-w"}},
		{name: "a plain public key", cert: func(pub ssh.PublicKey) []byte {
			return ssh.MarshalAuthorizedKey(pub)
		}, mode: 0o644, want: []string{"-cert.pub holds a plain ssh-ed25519 key, not a certificate"}},
		{name: "not a key at all", cert: func(ssh.PublicKey) []byte {
			return []byte("garbage\n")
		}, mode: 0o644, want: []string{"-cert.pub: ssh: no key found"}},
		{name: "a host certificate", cert: func(pub ssh.PublicKey) []byte {
			c := cert(t, l.ca, pub, 7, hour)
			c.CertType = ssh.HostCert
			if err := c.SignCert(rand.Reader, l.ca); err != nil {
				t.Fatal(err)
			}
			return ssh.MarshalAuthorizedKey(c)
		}, mode: 0o644, want: []string{"-cert.pub is a host certificate"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := noAgent(t)
			keyFile := filepath.Join(t.TempDir(), "id_site")
			if tc.home {
				keyFile = filepath.Join(home, ".ssh", "id_"+cmp.Or(tc.kind, "ed25519"))
			}
			priv := writeKey(t, keyFile, tc.kind)
			if tc.cert != nil {
				writeFile(t, keyFile+"-cert.pub", tc.cert(pubOf(t, priv)), tc.mode)
			}
			l.serial.Store(0)
			flag := keyFile
			if tc.home {
				flag = ""
			}
			err := l.dial(flag)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("login with the key's certificate: %v", err)
				}
				if got := l.serial.Load(); got != 7 {
					t.Errorf("the host accepted certificate serial %d; want 7", got)
				}
				return
			}
			if !errors.Is(err, errAuth) || !Permanent(err) {
				t.Fatalf("login: %v; want %v", err, errAuth)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("login: %v; want it to say %q", err, w)
				}
			}
			if len(tc.want) == 0 && strings.Contains(err.Error(), "certificate") {
				t.Errorf("login with no certificate file: %v; want no word of a certificate", err)
			}
		})
	}
}

// TestSSHCertRenewed: the certificate file is read at each connection: a
// certificate renewed on disk (as sshproxy or step-ca do, a day's or an
// hour's certificate at a time) is the one the next connection offers,
// expired or renewed, with no restart of the CLS.
func TestSSHCertRenewed(t *testing.T) {
	l := startCertLogin(t)
	noAgent(t)
	keyFile := filepath.Join(t.TempDir(), "id_site")
	pub := pubOf(t, writeKey(t, keyFile, ""))
	certFile := keyFile + "-cert.pub"
	hour := uint64(time.Now().Add(time.Hour).Unix())
	for i, step := range []struct {
		serial, validBefore uint64
		want                string // in the error; "" logged in
	}{
		{1, hour, ""},
		{2, uint64(time.Now().Add(-time.Minute).Unix()), "expired at"},
		{3, hour, ""},
		{4, hour, ""},
	} {
		// As a renewal writes it: a new file renamed over the old.
		tmp := certFile + ".new"
		writeFile(t, tmp, ssh.MarshalAuthorizedKey(cert(t, l.ca, pub, step.serial, step.validBefore)), 0o644)
		if err := os.Rename(tmp, certFile); err != nil {
			t.Fatal(err)
		}
		l.serial.Store(0)
		err := l.dial(keyFile)
		switch {
		case step.want == "" && err != nil:
			t.Fatalf("connection %d, certificate serial %d: %v", i+1, step.serial, err)
		case step.want == "" && l.serial.Load() != step.serial:
			t.Errorf("connection %d: the host accepted certificate serial %d; want %d, the one on disk", i+1, l.serial.Load(), step.serial)
		case step.want != "" && (!errors.Is(err, errAuth) || !strings.Contains(err.Error(), step.want)):
			t.Errorf("connection %d, certificate serial %d: %v; want %v saying %q", i+1, step.serial, err, errAuth, step.want)
		}
	}
}

// TestSSHAgentCert: an ssh-agent's certificates are offered (x/crypto's
// agent client returns them as signers); and the default keys' are
// offered after the agent's keys, when the agent holds none the host
// accepts (they were not offered at all behind an agent: x/crypto tries
// a "publickey" method once, and the default keys were a second one).
func TestSSHAgentCert(t *testing.T) {
	l := startCertLogin(t)
	hour := uint64(time.Now().Add(time.Hour).Unix())
	cases := []struct {
		name string
		// agent is what the agent holds; file, if set, makes the default
		// key ~/.ssh/id_ed25519 and its certificate.
		agent func(t *testing.T) agent.AddedKey
		file  bool
	}{
		{name: "agent holding a cert", agent: func(t *testing.T) agent.AddedKey {
			_, priv, _ := ed25519.GenerateKey(rand.Reader)
			return agent.AddedKey{PrivateKey: priv, Certificate: cert(t, l.ca, pubOf(t, priv), 7, hour)}
		}},
		{name: "agent without, default key with a cert", agent: func(t *testing.T) agent.AddedKey {
			_, priv, _ := ed25519.GenerateKey(rand.Reader)
			return agent.AddedKey{PrivateKey: priv}
		}, file: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := noAgent(t)
			keyring := agent.NewKeyring()
			if err := keyring.Add(tc.agent(t)); err != nil {
				t.Fatal(err)
			}
			t.Setenv("SSH_AUTH_SOCK", serveAgent(t, keyring))
			if tc.file {
				keyFile := filepath.Join(home, ".ssh", "id_ed25519")
				pub := pubOf(t, writeKey(t, keyFile, ""))
				writeFile(t, keyFile+"-cert.pub", ssh.MarshalAuthorizedKey(cert(t, l.ca, pub, 7, hour)), 0o644)
			}
			l.serial.Store(0)
			if err := l.dial(""); err != nil {
				t.Fatalf("login: %v", err)
			}
			if got := l.serial.Load(); got != 7 {
				t.Errorf("the host accepted certificate serial %d; want 7", got)
			}
		})
	}
}

// serveAgent serves keyring as an ssh-agent on a unix socket and returns
// its path: short, under the system's temporary directory, as a socket's
// path must be.
func serveAgent(t *testing.T, keyring agent.Agent) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mqagent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				agent.ServeAgent(keyring, c)
			}()
		}
	}()
	return sock
}

// TestSSHCertSkippedKeyStillOffered: a certificate skipped (here one
// that does not parse, and one others can write) or refused by a login
// host that knows only the plain key leaves the key offered after it:
// a bad certificate file beside a key never costs a login that the key
// alone gets.
func TestSSHCertSkippedKeyStillOffered(t *testing.T) {
	l := startSFTPLogin(t)
	ca := newSigner(t)
	signer, err := sshkey.LoadSigner(l.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"garbage", []byte("garbage\n"), 0o644},
		{"writable by others", ssh.MarshalAuthorizedKey(cert(t, ca, signer.PublicKey(), 1, ssh.CertTimeInfinity)), 0o666},
		{"valid, from a CA the host does not trust", ssh.MarshalAuthorizedKey(cert(t, ca, signer.PublicKey(), 1, ssh.CertTimeInfinity)), 0o644},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, l.keyFile+"-cert.pub", tc.data, tc.mode)
			l.dial(t, SSHConfig{})
		})
	}
}

// A default key that cannot be offered (encrypted, or open to others) is
// named in the error the user sees, with the way out, rather than "no
// SSH key" alone; a missing one is not.
func TestDefaultKeyNotOfferedSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		want []string
	}{
		{"missing", func(*testing.T, string) {}, []string{"no SSH key: give --key, run an ssh-agent (ssh-add"}},
		{"encrypted", func(t *testing.T, path string) {
			_, priv, _ := ed25519.GenerateKey(rand.Reader)
			block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, pem.EncodeToMemory(block), 0o600)
		}, []string{"ssh-add loads an encrypted key", "id_ed25519 is encrypted", "not offered"}},
		{"open to others", func(t *testing.T, path string) {
			writeKey(t, path, "")
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"id_ed25519 is", "0644", "not offered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := noAgent(t)
			if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
				t.Fatal(err)
			}
			tc.make(t, filepath.Join(home, ".ssh", "id_ed25519"))
			_, _, _, err := authMethods("", home)
			if err == nil {
				t.Fatal("authMethods found a key")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.name == "missing" && strings.Contains(err.Error(), "not offered") {
				t.Errorf("a missing key is named: %q", err)
			}
		})
	}
}
