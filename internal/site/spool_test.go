package site

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/mq-hpc/mq/internal/placeholder/spool"
	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/protocol"
)

// spoolRunner is a login host on this machine's filesystem (home is its
// $HOME), with an SFTP session of a server on that filesystem.
type spoolRunner struct {
	shRunner
	c *sftp.Client
}

func (r spoolRunner) SFTP() (*sftp.Client, error) { return r.c, nil }

func osSFTP(t *testing.T) *sftp.Client {
	t.Helper()
	cs, ss := net.Pipe()
	srv, err := sftp.NewServer(ss)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	c, err := sftp.NewClientPipe(cs, cs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); srv.Close() })
	return c
}

// A connection to the login host made, the CLS reads the reports the
// site's placeholders spooled in the output directory it gave them there
// (base/out/spool), over SFTP, and applies each file as its
// placeholder's report (Remote.Reports); a file applied is removed, one
// whose reports are refused (a placeholder of another site) is set aside.
// While the connection lasts it looks again (every SpoolEvery; here a
// millisecond): a file spooled later is applied too.
func TestRemoteDeliversSpool(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "mqagent")
	os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o755)
	home := t.TempDir()
	spec := protocol.SiteSpec{Name: "s", Type: Slurm, SSH: "u@h", Walltime: 3600, Slots: 1}
	if err := Validate(&spec); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, ".mq-sites", "x", "s", "out", spool.Dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mine := []protocol.Report{{ID: 11, Attempt: 1, Started: t0, Finished: t0}, {ID: 12, Attempt: 2, Exit: 3, Started: t0, Finished: t0}}
	if _, err := spool.Write(dir, 7, 0, mine); err != nil {
		t.Fatal(err)
	}
	if _, err := spool.Write(dir, 9, 0, mine[:1]); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []spool.File
	dials := 0
	r := &Remote{Spec: spec, Batch: ForType(spec.Type), CLSAddr: "127.0.0.1:1", JobName: "mq-s-x", Dir: ".mq-sites/x", spoolEvery: time.Millisecond,
		Agent: func(string, string) (string, error) { return agent, nil },
		Dial: func(context.Context) (login.Runner, error) {
			dials++
			return spoolRunner{shRunner{home}, osSFTP(t)}, nil
		},
		Reports: func(_ context.Context, f spool.File) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, f)
			if f.Placeholder != 7 {
				return spool.CheckRefused(protocol.Errorf(protocol.CodeForbidden, "placeholder %d is of another site", f.Placeholder))
			}
			return nil
		},
	}
	if _, err := r.runner(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.Retarget(&Remote{Spec: spec, Batch: ForType(spec.Type)}) // cls site set, as the delivery runs
	deadline := time.Now().Add(time.Minute)
	for {
		es, _ := os.ReadDir(dir)
		if len(es) == 1 && strings.HasPrefix(es[0].Name(), "9-") && strings.HasSuffix(es[0].Name(), spool.Suffix+".bad") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spool after a minute: %v; want the other site's file set aside alone", es)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	i := slices.IndexFunc(got, func(f spool.File) bool { return f.Placeholder == 7 })
	if len(got) != 2 || i < 0 || !slices.EqualFunc(got[i].Reports, mine, func(a, b protocol.Report) bool {
		return a.ID == b.ID && a.Attempt == b.Attempt && a.Exit == b.Exit && a.Finished.Equal(b.Finished)
	}) {
		t.Errorf("applied %+v; want placeholder 7's reports and 9's tried", got)
	}
	mu.Unlock()

	// Spooled while the connection lasts: applied at a later use of it.
	later, err := spool.Write(dir, 7, 0, []protocol.Report{{ID: 13, Attempt: 1, Started: t0, Finished: t0}})
	if err != nil || later != 1 {
		t.Fatal(err)
	}
	for applied := false; !applied; {
		if _, err := r.runner(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		applied = slices.ContainsFunc(got, func(f spool.File) bool { return f.Reports[0].ID == 13 })
		mu.Unlock()
		if !applied && time.Now().After(deadline) {
			t.Fatal("a file spooled while the connection lasts was not applied")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if dials != 1 {
		t.Errorf("%d dials; want the one connection kept", dials)
	}
}
