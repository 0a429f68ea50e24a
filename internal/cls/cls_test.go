package cls_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/cls"
	"github.com/mq-hpc/mq/internal/netfs"
	"github.com/mq-hpc/mq/internal/placeholder"
	"github.com/mq-hpc/mq/protocol"
)

// startCLS runs a CLS in-process in a fresh home, without local
// placeholders (they would be this test binary), until the test ends.
func startCLS(t *testing.T, cfg cls.Config) *cls.CLS {
	t.Helper()
	if cfg.Home == "" {
		cfg.Home = shortHome(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c, err := cls.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		c.Close()
	})
	return c
}

// shortHome is a home whose socket path fits a Unix socket (t.TempDir's
// may not).
func shortHome(t *testing.T) string {
	dir, err := os.MkdirTemp("", "mqcls")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "home")
}

// A CLS started in-process serves its socket: a job submitted there is
// run by a placeholder that dials the socket, and its end is reported.
func TestRunServesJobs(t *testing.T) {
	c := startCLS(t, cls.Config{Version: "test"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cl, err := client.Dial(ctx, c.Home(), "", "cls-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sub, err := client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "t", Command: "exit 3"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sub.IDs) != 1 {
		t.Fatalf("submitted ids %v", sub.IDs)
	}

	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	agent := placeholder.New(placeholder.Config{
		Dial: func(ctx context.Context) (io.ReadWriteCloser, error) { return client.DialSocket(ctx, c.Home()) },
		Site: "local", Host: "test", OutDir: filepath.Join(c.Home(), "output"),
	})
	go agent.Run(agentCtx)

	w, err := client.Do(ctx, cl, protocol.OpWait, protocol.Wait{IDs: sub.IDs, TimeoutMS: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != 1 || w.Jobs[0].Exit == nil || *w.Jobs[0].Exit != 3 {
		t.Fatalf("job ended %+v (pending %v); want exit 3", w.Jobs, w.Pending)
	}
}

// One CLS per home: a second one is refused while the first is open, and
// the home is free again once it is closed.
func TestOneCLSPerHome(t *testing.T) {
	home := shortHome(t)
	ctx := context.Background()
	first, err := cls.New(ctx, cls.Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cls.New(ctx, cls.Config{Home: home}); err == nil || !strings.Contains(err.Error(), "another CLS is already serving") {
		t.Fatalf("second CLS on the same home: %v", err)
	}
	first.Close()
	again, err := cls.New(ctx, cls.Config{Home: home})
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	again.Close()
}

// New sets the umask to 077 for what the CLS makes (its socket is the
// owner's alone) and Close gives the process its umask back, also when
// New fails.
func TestUmaskRestored(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	home := shortHome(t)
	c, err := cls.New(context.Background(), cls.Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(client.SocketPath(c.Home()))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("socket mode %v: others may use it", fi.Mode().Perm())
	}
	c.Close()
	if got := syscall.Umask(0o022); got != 0o022 {
		t.Errorf("umask after Close = %03o, want 022", got)
	}
	os.Chmod(c.Home(), 0o777) // New fails after it set the umask
	if _, err := cls.New(context.Background(), cls.Config{Home: home}); err == nil {
		t.Fatal("a world-writable home was accepted")
	}
	if got := syscall.Umask(0o022); got != 0o022 {
		t.Errorf("umask after a failed New = %03o, want 022", got)
	}
}

// A home anyone may write is refused before anything is opened in it.
func TestRefusesWritableHome(t *testing.T) {
	home := shortHome(t)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o777)
	_, err := cls.New(context.Background(), cls.Config{Home: home})
	if err == nil {
		t.Fatal("a world-writable home was accepted")
	}
	if _, serr := os.Stat(filepath.Join(home, "mq.db")); serr == nil {
		t.Errorf("refused (%v), but mq.db was made", err)
	}
}

// The CLS answers nothing before it can take every request: a client that
// reaches the socket while Run is still starting (a script waiting for
// mqstat, then adding a site) waits, and its `site add` then succeeds; it
// never gets "sites are not being managed".
func TestNoAnswerBeforeStarted(t *testing.T) {
	home := shortHome(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cls.New(ctx, cls.Config{Home: home, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		info protocol.SiteInfo
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		cl, err := client.Dial(ctx, c.Home(), "", "early")
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer cl.Close()
		info, err := client.Do(ctx, cl, protocol.OpSiteAdd, protocol.SiteSpec{Name: "a", Type: "local", Max: 1})
		answered <- answer{info, err}
	}()
	// Run is held before the sites start until the early client is
	// answered; a CLS that serves only once started cannot answer it
	// there, and goes on after a while. The wait only decides whether the
	// old race shows; the test passes on a fixed CLS however slow it is.
	var early *answer
	cls.SetBeforeStart(c, func() {
		select {
		case a := <-answered:
			early = &a
		case <-time.After(2 * time.Second):
		}
	})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		c.Close()
	}()
	a := early
	if a == nil {
		select {
		case got := <-answered:
			a = &got
		case <-ctx.Done():
			t.Fatal("the early client was never answered")
		}
	}
	if a.err != nil {
		t.Fatalf("site add sent while the CLS was starting: %v", a.err)
	}
	if a.info.Name != "a" {
		t.Fatalf("site add answered %+v", a.info)
	}
}

// The CLS's own local placeholders have no time limit, and the store knows
// it from the start: a job submitted before any of them registers is not
// warned of as too long for a stored site's walltime. (Their agent here
// exits at once, so none ever registers.)
func TestEmbeddedSiteKnownBeforeItsPlaceholders(t *testing.T) {
	t.Parallel()
	c := startCLS(t, cls.Config{Home: shortHome(t), Local: 1, AgentExe: "/bin/false"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, c.Home(), "", "cls-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := client.Do(ctx, cl, protocol.OpSiteAdd, protocol.SiteSpec{Name: "short", Type: "local", Max: 0, Walltime: 120}); err != nil {
		t.Fatal(err)
	}
	r, err := client.Do(ctx, cl, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "t", Command: "true", Cwd: "/tmp", Time: 3600}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) > 0 {
		t.Errorf("warnings %q; want none: the CLS's own placeholders have no time limit", r.Warnings)
	}
}

// A home on a network filesystem is refused in one line that names the
// filesystem and the ways out, before anything is made in it; with
// AllowNetworkFS it is served, with a warning.
func TestRefusesNetworkHome(t *testing.T) {
	home := shortHome(t)
	nfs := func(string) (netfs.Kind, error) { return 0x6969, nil }
	_, err := cls.New(context.Background(), cls.WithFSKind(cls.Config{Home: home}, nfs))
	if err == nil {
		t.Fatal("a home on NFS was served")
	}
	msg := err.Error()
	for _, want := range []string{"on NFS", "MQ_HOME", "--allow-network-fs"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error %q is more than one line", msg)
	}
	if _, serr := os.Stat(filepath.Join(home, "mq.db")); serr == nil {
		t.Errorf("refused, but mq.db was made")
	}
	var notes strings.Builder
	c, err := cls.New(context.Background(), cls.WithFSKind(cls.Config{Home: home, AllowNetworkFS: true, Notes: &notes}, nfs))
	if err != nil {
		t.Fatalf("with AllowNetworkFS: %v", err)
	}
	c.Close()
	if !strings.Contains(notes.String(), "network filesystem") {
		t.Errorf("served on NFS without a warning; notes: %q", notes.String())
	}
	// A local filesystem is served without a word about it.
	notes.Reset()
	c, err = cls.New(context.Background(), cls.WithFSKind(cls.Config{Home: home, Notes: &notes}, func(string) (netfs.Kind, error) { return 0xEF53, nil }))
	if err != nil {
		t.Fatalf("on ext4: %v", err)
	}
	c.Close()
	if notes.Len() > 0 {
		t.Errorf("notes on ext4: %q", notes.String())
	}
}
