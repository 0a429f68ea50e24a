package login

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// A login host whose key is vouched for by a host certificate authority
// (a known_hosts "@cert-authority" line, as centres that sign their hosts'
// keys publish) is accepted when its certificate is that CA's, and
// refused as unknown when it is another's, unless known_hosts has the
// plain key the certificate certifies (ssh checks that too). The host
// shows its plain key too, as sshd does beside a certificate: a plain
// line of another type for it in known_hosts does not make that key look
// changed.
func TestHostCertificateAuthority(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sameCA     bool
		plainLine  bool // a line for another plain key of the host's, of another type
		plainKnown bool // a line for the plain key the certificate certifies
		wantErr    error
	}{
		{"signed by the known CA", true, false, false, nil},
		{"signed by the known CA, a plain line too", true, true, false, nil},
		{"signed by another CA", false, false, false, ErrHostUnknown},
		{"signed by another CA, its key known", false, false, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := noAgent(t)
			key := filepath.Join(home, "key")
			writeKey(t, key, "")
			ca, other := newSigner(t), newSigner(t)
			host := newSigner(t)
			signer := ca
			if !tc.sameCA {
				signer = other
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			hc := &ssh.Certificate{Key: host.PublicKey(), CertType: ssh.HostCert, KeyId: "login",
				ValidPrincipals: []string{"127.0.0.1"}, ValidBefore: ssh.CertTimeInfinity}
			if err := hc.SignCert(rand.Reader, signer); err != nil {
				t.Fatal(err)
			}
			hostCert, err := ssh.NewCertSigner(hc, host)
			if err != nil {
				t.Fatal(err)
			}
			cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil }}
			cfg.AddHostKey(hostCert)
			cfg.AddHostKey(host)
			go serveLoginOnly(ln, cfg)
			kh := filepath.Join(home, "known_hosts")
			line := "@cert-authority [127.0.0.1]:" + portOf(ln.Addr().String()) + " " + string(ssh.MarshalAuthorizedKey(ca.PublicKey()))
			if tc.plainKnown {
				line += "[127.0.0.1]:" + portOf(ln.Addr().String()) + " " + string(ssh.MarshalAuthorizedKey(host.PublicKey()))
			}
			if tc.plainLine {
				other := writeKey(t, filepath.Join(home, "rsa"), "rsa")
				line += "[127.0.0.1]:" + portOf(ln.Addr().String()) + " " + string(ssh.MarshalAuthorizedKey(pubOf(t, other)))
			}
			if err := os.WriteFile(kh, []byte(line), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := DialSSH(context.Background(), SSHConfig{User: "u", Addr: ln.Addr().String(), KeyFile: key, KnownHosts: kh, Timeout: time.Minute})
			if err == nil {
				// What placeholders pin: the certified key, which outlives
				// the certificate.
				if got := s.HostKey(); !bytes.Equal(got.Marshal(), host.PublicKey().Marshal()) {
					t.Errorf("HostKey() is %s %s; want the certified key %s", got.Type(), ssh.FingerprintSHA256(got), ssh.FingerprintSHA256(host.PublicKey()))
				}
				s.Close()
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("DialSSH: %v; want %v", err, tc.wantErr)
			}
		})
	}
}
