package site

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/protocol"
)

// A login host slow to connect to (a dial, a handshake, the agent's upload
// over a slow link) holds the site's connection lock for as long: cls site
// list, and every placeholder's registration, which take the Manager's
// lock, must not wait for it. (Platform once read under that lock, and
// cls site list hung for the whole dial.)
func TestSlowLoginDoesNotBlockManager(t *testing.T) {
	dialing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r := &Remote{Spec: protocol.SiteSpec{Name: "slow", Type: Slurm, SSH: "u@h"}, Batch: ForType(Slurm), JobName: "mq-slow-x",
		Dial: func(ctx context.Context) (Runner, error) {
			once.Do(func() { close(dialing) })
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, errors.New("cannot reach the login host h:22: i/o timeout")
		}}
	st := &fakeStore{ready: 1}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond, Open: func(protocol.SiteSpec, func(int)) (Site, error) { return r, nil }}
	ctx := startManager(t, m)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "slow", Type: Slurm, SSH: "u@h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dialing:
	case <-time.After(30 * time.Second):
		t.Fatal("the site never dialled its login host")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.List()
		m.Placeholder(1, protocol.Register{Site: "slow"}, true)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("cls site list and a placeholder's registration waited for the dial of a slow login host")
	}
	close(release)
	eventually(t, "degraded", func() bool { return m.List()[0].State == StateDegraded })
}

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
