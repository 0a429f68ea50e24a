package stage

import (
	"bytes"
	"context"
	"io"
	"slices"
	"testing"

	"github.com/pkg/sftp"

	"github.com/mq-hpc/mq/internal/stage/sftptest"
)

// memSFTP is an in-memory SFTP server that keeps modes (sftptest), and a
// client of it.
func memSFTP(tb testing.TB) (*sftp.Client, *sftptest.Server) {
	tb.Helper()
	m, h := sftptest.New()
	a, b := socketPair(tb)
	srv := sftp.NewRequestServer(b, h)
	go srv.Serve()
	c, err := sftp.NewClientPipe(a, a)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return c, m
}

// TestSFTPCreatePrivate: below a data root, a staged file is made in a
// directory already private, never in a directory others may search
// (the root may be readable by others; a job may have made the
// directory), where they could open it before its chmod and read the
// input as it is written. A temporary file an interrupted transfer left
// is taken over; only the file stays, and Sweep removes what a transfer
// left of its directory.
func TestSFTPCreatePrivate(t *testing.T) {
	t.Parallel()
	c, m := memSFTP(t)
	const root = "/data"
	for _, d := range []string{root, root + "/d"} {
		if err := c.Mkdir(d); err != nil {
			t.Fatal(err)
		}
	}
	pl := SFTP{Client: c, Root: root, Writer: "w"}
	// What an interrupted transfer of an older version left beside it.
	old, err := c.Create(root + "/d/" + tempName("in", "w"))
	if err != nil {
		t.Fatal(err)
	}
	old.Write([]byte("stale"))
	old.Close()
	m.Forget() // the test's own
	ctx := context.Background()
	data := []byte("the user's input")
	for range 2 { // the second over the first
		tmp, err := pl.Create(ctx, "/d/in")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tmp.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := tmp.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	open := m.Open()
	if len(open) > 0 {
		t.Errorf("made in a directory others may search: %v", open)
	}
	f, err := c.Open(root + "/d/in")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, data) {
		t.Errorf("%s/d/in holds %q, want %q", root, got, data)
	}
	if names := dirNames(t, c, root+"/d"); !slices.Equal(names, []string{"in"}) {
		t.Errorf("%s/d holds %v, want in alone", root, names)
	}
	// A transfer cut short leaves its directory: Sweep takes it.
	tmp, err := pl.Create(ctx, "/d/cut")
	if err != nil {
		t.Fatal(err)
	}
	tmp.Write(data)
	n, err := pl.Sweep(ctx)
	if err != nil || n != 1 {
		t.Errorf("Sweep = %d, %v; want 1 removed", n, err)
	}
	if names := dirNames(t, c, root+"/d"); !slices.Equal(names, []string{"in"}) {
		t.Errorf("after Sweep %s/d holds %v, want in alone", root, names)
	}
}

func dirNames(t *testing.T, c *sftp.Client, dir string) []string {
	t.Helper()
	ents, err := c.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}
