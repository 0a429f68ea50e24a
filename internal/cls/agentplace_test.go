package cls

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/placeholder"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/internal/stage"
	"github.com/mq-hpc/mq/protocol"
)

// agentRig is a store and server with an agent hub, and real agents that
// reach it over net.Pipe, each with a data root of its own.
type agentRig struct {
	t   *testing.T
	hub *agentHub
	srv *server.Server
	ctx context.Context
}

func newAgentRig(t *testing.T) *agentRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := metaqueue.Open(ctx, metaqueue.Options{Path: filepath.Join(t.TempDir(), "mq.db"), Sync: metaqueue.SyncNormal, Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := &agentRig{t: t, hub: newAgentHub(), ctx: ctx}
	r.srv = &server.Server{Store: st, Files: r.hub, OnPlaceholder: func(id int64, reg protocol.Register, connected bool) {
		r.hub.placeholder(id, reg.Site, reg.Host, connected)
	}}
	t.Cleanup(func() {
		cancel()
		r.srv.Wait()
		st.Close()
	})
	return r
}

// agent starts an agent at site and host and returns its data root, once
// it asks for file orders.
func (r *agentRig) agent(site, host string) (root string, stop func()) {
	r.t.Helper()
	return r.agentAt(site, host, r.t.TempDir())
}

// agentIn starts an agent whose data root is root.
func (r *agentRig) agentIn(site, host, root string) string {
	r.t.Helper()
	root, _ = r.agentAt(site, host, root)
	return root
}

func (r *agentRig) agentAt(site, host, root string) (string, func()) {
	r.t.Helper()
	var stop func()
	dial := func(context.Context) (io.ReadWriteCloser, error) {
		a, b := net.Pipe()
		go r.srv.ServeConn(r.ctx, b, protocol.RolePlaceholder)
		return a, nil
	}
	a := placeholder.New(placeholder.Config{Dial: dial, Site: site, Host: host, Slots: 1, OutDir: r.t.TempDir(), DataRoot: root})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			r.t.Error("agent did not stop")
		}
	}
	r.t.Cleanup(stop)
	deadline := time.Now().Add(20 * time.Second)
	for !r.hub.reachable(site, host) {
		if time.Now().After(deadline) {
			r.t.Fatalf("agent %s:%s never asked for file orders", site, host)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return root, stop
}

// TestAgentPathMoves: files go to a placeholder's host over the agent's
// own connection and come back from it byte-identical, in chunks (the
// file is several MaxFileChunk long), checksummed at both ends; a copy
// whose checksum is not the expected one never takes its name there; a
// missing file is reported missing; remove removes; a host without an
// agent cannot be reached.
func TestAgentPathMoves(t *testing.T) {
	t.Parallel()
	r := newAgentRig(t)
	root1, _ := r.agent("nodes", "n1")
	src, back := t.TempDir(), t.TempDir()
	data := make([]byte, 3*protocol.MaxFileChunk+12345)
	rand.Read(data)
	const p = "/w/in/big.dat"
	if err := os.MkdirAll(filepath.Join(src, "w/in"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, p), data, 0o600); err != nil {
		t.Fatal(err)
	}
	var rates stage.Rates
	m := &stage.Mover{Rates: &rates, Places: func(name string) (stage.Place, error) {
		switch name {
		case "local":
			return stage.Dir{Root: src}, nil
		case "back":
			return stage.Dir{Root: back}, nil
		}
		site, host, _ := strings.Cut(name, ":")
		return agentPlace{hub: r.hub, site: site, host: host}, nil
	}}
	ctx := context.Background()
	res := m.Move(ctx, stage.Transfer{Path: p, From: "local", To: "nodes:n1", Size: int64(len(data))})
	if res.Err != nil || res.Bytes != int64(len(data)) {
		t.Fatalf("to the agent: %+v", res)
	}
	got, err := os.ReadFile(filepath.Join(root1, p))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the agent's copy: %d bytes, %v", len(got), err)
	}
	if _, _, ok := rates.Link("nodes:n1"); !ok {
		t.Error("the agent path's transfer was not measured")
	}
	back1 := m.Move(ctx, stage.Transfer{Path: p, From: "nodes:n1", To: "back", Size: int64(len(data)), SHA256: res.SHA256})
	if back1.Err != nil {
		t.Fatalf("from the agent: %+v", back1)
	}
	if got, err := os.ReadFile(filepath.Join(back, p)); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the copy from the agent: %d bytes, %v", len(got), err)
	}

	// A wrong expected checksum: the copy is refused and nothing stays.
	const q = "/w/in/other.dat"
	os.WriteFile(filepath.Join(src, q), data[:1000], 0o600)
	bad := m.Move(ctx, stage.Transfer{Path: q, From: "local", To: "nodes:n1", Size: 1000, SHA256: strings.Repeat("0", 64)})
	if !errors.Is(bad.Err, stage.ErrMismatch) {
		t.Fatalf("a wrong checksum: %v", bad.Err)
	}
	waitFor(t, "the refused copy's temporary file to go", func() bool {
		ents, _ := os.ReadDir(filepath.Join(root1, "w/in"))
		return len(ents) == 1 // big.dat alone
	})

	// Missing at the agent: fs.ErrNotExist, as a missing file anywhere.
	miss := m.Move(ctx, stage.Transfer{Path: "/w/none", From: "nodes:n1", To: "back", Size: -1})
	if !errors.Is(miss.Err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", miss.Err)
	}
	if err := (agentPlace{hub: r.hub, site: "nodes", host: "n1"}).Remove(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root1, p)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after remove: %v", err)
	}
	// No agent on n9.
	var u *unreachableError
	if _, err := (agentPlace{hub: r.hub, site: "nodes", host: "n9"}).Create(ctx, p); !errors.As(err, &u) {
		t.Fatalf("no agent there: %v", err)
	}
}

// TestAgentPathAgentGone: a transfer to an agent that goes away mid-way
// fails (it does not hang a stage worker), and leaves no file under the
// target's name.
func TestAgentPathAgentGone(t *testing.T) {
	t.Parallel()
	r := newAgentRig(t)
	root, stop := r.agent("nodes", "n1")
	pl := agentPlace{hub: r.hub, site: "nodes", host: "n1"}
	ctx := context.Background()
	tmp, err := pl.Create(ctx, "/w/x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.Write(make([]byte, protocol.MaxFileChunk)); err != nil {
		t.Fatal(err)
	}
	stop()
	errc := make(chan error, 1)
	go func() {
		_, err := tmp.Write(make([]byte, 2*protocol.MaxFileChunk))
		if err == nil {
			err = tmp.Commit(ctx)
		}
		errc <- err
	}()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a transfer to an agent that stopped succeeded")
		}
	case <-time.After(agentWait + 20*time.Second):
		t.Fatal("a transfer to an agent that stopped hangs")
	}
	if _, err := os.Stat(filepath.Join(root, "w/x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the target exists: %v", err)
	}
}

// slowPlace writes at most rate bytes per second: a slow login host.
type slowPlace struct {
	stage.Place
	rate float64
}

func (s slowPlace) Create(ctx context.Context, p string) (stage.Temp, error) {
	t, err := s.Place.Create(ctx, p)
	if err != nil {
		return nil, err
	}
	return &slowTemp{Temp: t, rate: s.rate}, nil
}

type slowTemp struct {
	stage.Temp
	rate float64
}

func (t *slowTemp) Write(b []byte) (int, error) {
	time.Sleep(time.Duration(float64(len(b)) / t.rate * float64(time.Second)))
	return t.Temp.Write(b)
}

// TestStagerChoosesFasterPath: to a site whose data root is shared by its
// login host and nodes, the stager measures both paths (SFTP first, then
// a placeholder's own connection) and then takes the faster, recording
// the path of each transfer; the site's link given to DC is the faster
// path's.
func TestStagerChoosesFasterPath(t *testing.T) {
	t.Parallel()
	r := newAgentRig(t)
	tp := newTestPlaces(t, "grid")
	// The agent's data root is the site's: one directory.
	gridRoot := tp.roots["grid"]
	tp.wrap = func(site string, p stage.Place) stage.Place {
		if site != "grid" {
			return p
		}
		// 128 KiB/s over "SFTP": the agent's connection, in process,
		// must only beat that, also under the race detector on a busy
		// machine (a file of stage.LargeBytes, the least that measures
		// a bandwidth, takes 8 s here).
		return slowPlace{Place: p, rate: 128 << 10}
	}
	st := newStager(1, tp.place, func(string) dc.Link { return dc.Link{Latency: 7, Bandwidth: 7e6} }, nil)
	st.alt = func(p catalog.Place) (stage.Place, bool) {
		if p.Site != "grid" || p.Host != "" || !r.hub.reachable("grid", "") {
			return nil, false
		}
		return agentPlace{hub: r.hub, site: "grid"}, true
	}
	fs := newFakeStore()
	st.start(fs)
	t.Cleanup(st.stop)
	root := r.agentIn("grid", "h1", gridRoot)

	var vias []string
	for i := range 4 {
		data := make([]byte, stage.LargeBytes+i)
		rand.Read(data)
		p := "/w/f" + string(rune('0'+i))
		sum := tp.put(t, catalog.LocalSite, p, data)
		st.Stage(catalog.StageRequest{Path: p, To: at("grid"), From: []catalog.Place{at(catalog.LocalSite)}, Size: int64(len(data)), SHA256: sum})
		res := fs.next(t)
		if res.Err != nil {
			t.Fatalf("transfer %d: %v", i, res.Err)
		}
		if got, err := os.ReadFile(filepath.Join(root, p)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("transfer %d: the copy at grid: %v", i, err)
		}
		vias = append(vias, res.Via)
	}
	want := []string{"fs>sftp", "fs>agent", "fs>agent", "fs>agent"}
	if strings.Join(vias, " ") != strings.Join(want, " ") {
		t.Fatalf("paths %v, want %v (SFTP measured at 128 KiB/s, the agent's connection faster)", vias, want)
	}
	_, sftpBW, _ := st.rates.Link("grid")
	_, agentBW, _ := st.rates.Link("grid" + agentSuffix)
	if l, ok := fs.link("grid"); !ok || l.Bandwidth != agentBW || agentBW <= sftpBW {
		t.Fatalf("grid's link for DC %+v; SFTP measured %.0f B/s, the agent path %.0f: want the agent path's", l, sftpBW, agentBW)
	}
}

// TestAgentPathDiskFull: a transfer to a placeholder's host whose data
// root is full fails at once with stage.ErrNoSpace, the agent's reason
// (its disk full): the place's fault, not the file's; not a 30 s wait
// for bytes it would never ask for.
func TestAgentPathDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if exec.Command("umount", dir).Run() != nil {
			exec.Command("umount", "-l", dir).Run()
		}
	})
	r := newAgentRig(t)
	r.agentIn("nodes", "n1", dir)
	src := t.TempDir()
	data := make([]byte, 3*protocol.MaxFileChunk)
	rand.Read(data)
	const p = "/w/big.dat"
	if err := os.MkdirAll(filepath.Join(src, "w"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, p), data, 0o600); err != nil {
		t.Fatal(err)
	}
	m := &stage.Mover{Places: func(name string) (stage.Place, error) {
		if name == "local" {
			return stage.Dir{Root: src}, nil
		}
		return agentPlace{hub: r.hub, site: "nodes", host: "n1"}, nil
	}}
	start := time.Now()
	res := m.Move(context.Background(), stage.Transfer{Path: p, From: "local", To: "nodes:n1", Size: int64(len(data))})
	if !errors.Is(res.Err, stage.ErrNoSpace) || !strings.Contains(res.Err.Error(), "no space left on device") {
		t.Fatalf("to a full host: %v, want ErrNoSpace with the agent's reason", res.Err)
	}
	if d := time.Since(start); d > agentWait/2 {
		t.Errorf("the failure took %s", d)
	}
	waitFor(t, "the agent's temporary file to go", func() bool {
		ents, _ := os.ReadDir(filepath.Join(dir, "w"))
		return len(ents) == 0
	})
}
