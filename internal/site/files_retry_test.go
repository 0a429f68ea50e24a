package site

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/pkg/sftp"

	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/protocol"
)

// filesRunner is a login host's connection for Remote.Files: it prepares
// (uname, $HOME, uploads) and hands out sftp, or fails with err, as a
// connection cut before the SSH client noticed does.
type filesRunner struct {
	sftp   *sftp.Client
	err    error
	closed atomic.Bool
	cuts   atomic.Int32
}

func (r *filesRunner) Cut() { r.cuts.Add(1) }

func (r *filesRunner) Run(context.Context, string) ([]byte, error) {
	return []byte("Linux x86_64\n/home/u\n"), nil
}
func (r *filesRunner) Put(context.Context, string, []byte, os.FileMode) (bool, error) {
	return true, nil
}
func (r *filesRunner) Close() error { r.closed.Store(true); return nil }
func (r *filesRunner) SFTP() (*sftp.Client, error) {
	if r.err != nil {
		return nil, r.err
	}
	return r.sftp, nil
}

// memSFTP is an SFTP client of an in-memory server.
func memSFTP(t *testing.T) *sftp.Client {
	t.Helper()
	cs, ss := net.Pipe()
	srv := sftp.NewRequestServer(ss, sftp.InMemHandler())
	go srv.Serve()
	c, err := sftp.NewClientPipe(cs, cs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); srv.Close() })
	return c
}

// Staging asks for the site's files over a connection that was cut a
// moment ago, before the SSH client noticed: Files drops it and tries one
// new connection rather than failing the transfer; a second dead one is
// an error, not a loop.
func TestFilesRetriesOneNewConnection(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "mqagent")
	if err := os.WriteFile(agent, []byte("agent"), 0o700); err != nil {
		t.Fatal(err)
	}
	cut := &login.ConnError{Err: errors.New("EOF")}
	for _, tc := range []struct {
		name    string
		runners []*filesRunner
		dials   int
		wantErr bool
	}{
		{"first cut", []*filesRunner{{err: cut}, {sftp: memSFTP(t)}}, 2, false},
		{"both cut", []*filesRunner{{err: cut}, {err: cut}, {sftp: memSFTP(t)}}, 2, true},
		{"not the connection", []*filesRunner{{err: errors.New("subsystem refused")}, {sftp: memSFTP(t)}}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dials := 0
			r := &Remote{Spec: protocol.SiteSpec{Name: "cut", Type: Slurm, SSH: "u@h"}, Batch: ForType(Slurm), JobName: "mq-cut-x",
				CLSAddr: "127.0.0.1:1", Agent: func(string, string) (string, error) { return agent, nil },
				Dial: func(context.Context) (login.Runner, error) {
					dials++
					return tc.runners[dials-1], nil
				}}
			c, root, err := r.Files(context.Background())
			if dials != tc.dials {
				t.Errorf("%d dials, want %d", dials, tc.dials)
			}
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Files = %p, nil error after %d dials", c, dials)
				}
				return
			}
			if err != nil {
				t.Fatalf("Files after one cut connection: %v", err)
			}
			if c != tc.runners[1].sftp {
				t.Errorf("Files gave %p, want the second connection's client", c)
			}
			if root != "/home/u/"+DefaultDataRoot {
				t.Errorf("data root %q", root)
			}
			if !tc.runners[0].closed.Load() {
				t.Error("the cut connection was not closed")
			}
		})
	}
}

// A transfer that stalled on the site's SFTP client cuts the connection
// under it (CutFiles), once; a client Files no longer gives (the site
// has reconnected since) cuts nothing.
func TestCutFiles(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "mqagent")
	if err := os.WriteFile(agent, []byte("agent"), 0o700); err != nil {
		t.Fatal(err)
	}
	fr := &filesRunner{sftp: memSFTP(t)}
	r := &Remote{Spec: protocol.SiteSpec{Name: "cut", Type: Slurm, SSH: "u@h"}, Batch: ForType(Slurm), JobName: "mq-cut-x",
		CLSAddr: "127.0.0.1:1", Agent: func(string, string) (string, error) { return agent, nil },
		Dial: func(context.Context) (login.Runner, error) { return fr, nil }}
	r.CutFiles(fr.sftp) // before Files gave it
	c, _, err := r.Files(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.CutFiles(memSFTP(t))
	if n := fr.cuts.Load(); n != 0 {
		t.Fatalf("%d cuts for clients Files did not give", n)
	}
	r.CutFiles(c)
	r.CutFiles(c)
	if n := fr.cuts.Load(); n != 1 {
		t.Errorf("%d cuts of the stalled client's connection, want 1", n)
	}
}
