package client

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fullSocket listens on a Unix socket with a backlog of 0 and never
// accepts, then connects until the backlog is full: the next connect gets
// EAGAIN. accept takes one waiting connection off the backlog.
func fullSocket(t *testing.T) (path string, accept func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "cls.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		c, err := net.Dial("unix", path)
		if errors.Is(err, syscall.EAGAIN) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if i > 100 {
			t.Skip("the kernel never refused a connection with EAGAIN")
		}
	}
	return path, func() {
		nfd, _, err := syscall.Accept(fd)
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { syscall.Close(nfd) })
	}
}

func TestDialWaitsOutFullBacklog(t *testing.T) {
	t.Parallel()
	path, accept := fullSocket(t)
	go func() {
		time.Sleep(100 * time.Millisecond)
		accept()
	}()
	c, err := dialSocket(context.Background(), path, time.Minute)
	if err != nil {
		t.Fatalf("dial gave up while the CLS was still accepting: %v", err)
	}
	c.Close()
}

func TestDialSaysWhatFailed(t *testing.T) {
	t.Parallel()
	full, _ := fullSocket(t)
	refused := filepath.Join(t.TempDir(), "refused.sock")
	ln, err := net.Listen("unix", refused)
	if err != nil {
		t.Skip(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays, nobody listens: ECONNREFUSED
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want, wantNot string
	}{
		{"backlog full", full, "is not accepting connections (backlog full", "is `cls serve` running?"},
		{"no socket", filepath.Join(t.TempDir(), "cls.sock"), "is `cls serve` running?", "backlog"},
		{"nobody listening", refused, "is `cls serve` running?", "backlog"},
		{"not a directory", filepath.Join(notDir, "cls.sock"), "cannot reach the CLS at", "is `cls serve` running?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dialSocket(context.Background(), tc.path, 200*time.Millisecond)
			if err == nil {
				t.Fatal("dial succeeded")
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, tc.wantNot) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q; want it to say %q", msg, tc.want)
			}
		})
	}
}
