package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// A client talks only to a CLS socket that is its user's own, in a home
// no one else can write: whoever made it would read every command and
// could answer as the CLS.
func TestDialSocketRefusesForeignSocket(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		spoil func(home, sock string) error
		want  string // "" = the dial succeeds
	}{
		{name: "own", spoil: func(string, string) error { return nil }},
		{name: "home writable by others", spoil: func(home, _ string) error { return os.Chmod(home, 0o777) }, want: "writable by others (mode 0777)"},
		{name: "link to a socket elsewhere", spoil: func(home, sock string) error {
			elsewhere := filepath.Join(filepath.Dir(home), "elsewhere.sock")
			if err := os.Rename(sock, elsewhere); err != nil {
				return err
			}
			return os.Symlink(elsewhere, sock)
		}, want: "is a symbolic link"},
		{name: "socket of another user", spoil: func(_, sock string) error {
			if os.Geteuid() != 0 {
				return errSkip
			}
			return os.Lchown(sock, 65534, 65534)
		}, want: "owned by uid 65534"},
		{name: "home of another user", spoil: func(home, _ string) error {
			if os.Geteuid() != 0 {
				return errSkip
			}
			return os.Chown(home, 65534, 65534)
		}, want: "owned by uid 65534"},
		// No socket yet: the home is checked all the same, or another
		// user who made it could put one there between check and dial.
		{name: "home writable by others, no socket yet", spoil: func(home, sock string) error {
			if err := os.Remove(sock); err != nil {
				return err
			}
			return os.Chmod(home, 0o777)
		}, want: "writable by others (mode 0777)"},
		{name: "home of another user, no socket yet", spoil: func(home, sock string) error {
			if os.Geteuid() != 0 {
				return errSkip
			}
			if err := os.Remove(sock); err != nil {
				return err
			}
			return os.Chown(home, 65534, 65534)
		}, want: "owned by uid 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home := filepath.Join(t.TempDir(), "h")
			os.Mkdir(home, 0o700)
			ln, err := net.Listen("unix", SocketPath(home))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if err := tc.spoil(home, SocketPath(home)); err == errSkip {
				t.Skip("needs root to give the file to another user")
			} else if err != nil {
				t.Fatal(err)
			}
			c, err := DialSocket(context.Background(), home)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatalf("dialled a socket that is not ours; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), "refusing the CLS socket") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want %q", err, tc.want)
			}
		})
	}
}

var errSkip = os.ErrInvalid

// A home that does not exist has no CLS: the dial says so as for a
// missing socket, not as for a foreign home.
func TestDialSocketNoHome(t *testing.T) {
	t.Parallel()
	_, err := DialSocket(context.Background(), filepath.Join(t.TempDir(), "none"))
	if err == nil || !strings.Contains(err.Error(), "is `cls serve` running?") {
		t.Fatalf("error %v; want it to ask whether cls serve runs", err)
	}
}

// The server's user, as the system tells it, must be ours: a socket that
// passed every check of its home is still refused when another user
// serves it.
func TestCheckPeer(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := checkPeer(c, os.Geteuid()); err != nil {
		t.Fatalf("own server refused: %v", err)
	}
	if _, known, _ := peerUID(c); !known {
		t.Skip("this system does not say who serves a socket")
	}
	err = checkPeer(c, os.Geteuid()+1)
	if err == nil || !strings.Contains(err.Error(), "its server runs as uid") {
		t.Fatalf("error %v; want the server's user refused", err)
	}
}

// TestResetIsClosed: a CLS that stops closes connections whose requests
// it has not read, and the kernel then resets them. That is the CLS going
// away, as end of file is: mqwait and mqsub -b wait for it to come back
// on ErrClosed, and failed at once on the reset.
func TestResetIsClosed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		line, err := r.ReadBytes('\n') // hello
		if err != nil {
			return
		}
		var req protocol.Request
		json.Unmarshal(line, &req)
		b, _ := protocol.AppendFrame(nil, protocol.Response{ID: req.ID, Body: json.RawMessage(`{"proto":1,"server":"x","role":"user"}`)})
		c.Write(b)
		// Wait for the next request by reading its first byte, and close
		// with the rest unread: what a stopping CLS does to a request in
		// flight. (The client sends nothing more until hello is
		// answered, so r has buffered none of it.)
		c.Read(make([]byte, 1))
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := New(context.Background(), c, protocol.RoleUser, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = Do(context.Background(), cl, protocol.OpSiteList, protocol.Empty{})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("a request the CLS closed on unread: %v; want ErrClosed", err)
	}
	t.Logf("error: %v", err)
}
