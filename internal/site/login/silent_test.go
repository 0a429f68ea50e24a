package login

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// A login host that accepts the connection and never answers: the dial
// gives up after its timeout saying so, not "use of closed network
// connection" (the timeout closes the connection under the handshake).
func TestDialSilentLoginHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile, kh := filepath.Join(dir, "key"), filepath.Join(dir, "known_hosts")
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	os.WriteFile(kh, nil, 0o600)
	start := time.Now()
	_, err = DialSSH(context.Background(), SSHConfig{User: "u", Addr: ln.Addr().String(), KeyFile: keyFile, KnownHosts: kh, Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no SSH handshake within 300ms") || strings.Contains(err.Error(), "closed network connection") {
		t.Errorf("dial of a silent login host: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the dial took %s, its timeout 300ms", d)
	}
}
