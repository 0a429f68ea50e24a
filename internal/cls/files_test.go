package cls

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"

	"github.com/mq-hpc/mq/internal/site"
	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/internal/stage"
	"github.com/mq-hpc/mq/protocol"
)

// fakeCatalog is the files ops' store: one file's replicas.
type fakeCatalog struct {
	replicas  []protocol.Replica
	transfers []protocol.TransferInfo
	added     []protocol.Replica
	dropped   []catalog.Place
}

func (f *fakeCatalog) Files(context.Context, protocol.FilesQuery) (protocol.FilesReply, error) {
	return protocol.FilesReply{}, nil
}

func (f *fakeCatalog) Replicas(context.Context, string) ([]protocol.Replica, error) {
	return f.replicas, nil
}

func (f *fakeCatalog) AddReplica(_ context.Context, path string, at catalog.Place, size int64, sum string) (protocol.CatalogFile, error) {
	r := protocol.Replica{Site: at.Site, Host: at.Host, Size: size, SHA256: sum}
	f.added = append(f.added, r)
	return protocol.CatalogFile{Path: path, Size: &size, SHA256: sum, Replicas: []protocol.Replica{r}}, nil
}

func (f *fakeCatalog) RemoveReplicas(_ context.Context, path, site string, force bool) (protocol.CatalogFile, []catalog.Place, error) {
	return protocol.CatalogFile{Path: path}, f.dropped, nil
}

func (f *fakeCatalog) RecordTransfer(_ context.Context, t protocol.TransferInfo) error {
	f.transfers = append(f.transfers, t)
	return nil
}

func newTestFiles(t *testing.T, tp *testPlaces, cat *fakeCatalog) *files {
	return &files{store: cat, places: tp.place, home: t.TempDir(), log: slog.New(slog.DiscardHandler), now: time.Now}
}

// files.get copies a file from a site's place to Dest on the CLS host,
// byte for byte and verified, accounts the transfer, and never overwrites
// a file or writes into MQ_HOME.
func TestFilesGet(t *testing.T) {
	tp := newTestPlaces(t, "a", "b")
	data := bytes.Repeat([]byte("hom p1\n"), 100_000)
	sum := tp.put(t, "b", "/w/hom/p1.tsv", data)
	cat := &fakeCatalog{replicas: []protocol.Replica{
		{Site: "a", Size: int64(len(data)), SHA256: sum}, // listed, but lost behind the CLS's back
		{Site: "b", Size: int64(len(data)), SHA256: sum},
	}}
	f := newTestFiles(t, tp, cat)
	ctx := context.Background()
	dest := filepath.Join(t.TempDir(), "p1.tsv")
	ti, err := f.get(ctx, protocol.FilesGet{Path: "/w/hom/p1.tsv", Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(dest); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("dest holds %d bytes (%v), want %d identical", len(got), err, len(data))
	}
	if ti.From != "b" || ti.To != catalog.LocalSite || ti.Bytes != int64(len(data)) || ti.Error != "" || ti.Started == "" {
		t.Errorf("transfer %+v", ti)
	}
	if len(cat.transfers) != 2 || cat.transfers[0].Error == "" || cat.transfers[1] != ti {
		t.Errorf("recorded %+v; want the failed try from a, then %+v", cat.transfers, ti)
	}

	for _, tc := range []struct {
		req  protocol.FilesGet
		want string
	}{
		{protocol.FilesGet{Path: "/w/hom/p1.tsv", Dest: dest}, "does not overwrite"},
		{protocol.FilesGet{Path: "/w/hom/p1.tsv", Dest: "rel/p1.tsv"}, "not an absolute path"},
		{protocol.FilesGet{Path: "/w/hom/p1.tsv", Dest: filepath.Join(f.home, "x")}, "MQ_HOME"},
		{protocol.FilesGet{Path: "/w/../etc/passwd", Dest: dest + "2"}, "path refused"},
		{protocol.FilesGet{Path: "/w/hom/p1.tsv", Site: "c", Dest: dest + "2"}, "no replica"},
	} {
		if _, err := f.get(ctx, tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("get %+v: %v; want %q", tc.req, err, tc.want)
		}
	}
	// Only from the site asked for.
	cat.replicas[1].SHA256 = strings.Repeat("0", 64)
	if _, err := f.get(ctx, protocol.FilesGet{Path: "/w/hom/p1.tsv", Site: "b", Dest: dest + "3"}); err == nil {
		t.Error("a copy whose checksum differs from the catalog's was accepted")
	}
	if _, err := os.Stat(dest + "3"); err == nil {
		t.Error("a copy that failed its check was left")
	}
}

// files.add measures and hashes the file where it is; files.rm deletes
// dropped replicas in sites' data roots, never the user's own files on
// the CLS host.
func TestFilesAddRemove(t *testing.T) {
	tp := newTestPlaces(t, "a")
	data := []byte("made by hand at a\n")
	sum := tp.put(t, "a", "/d/x", data)
	tp.put(t, "local", "/d/x", data)
	cat := &fakeCatalog{}
	f := newTestFiles(t, tp, cat)
	ctx := context.Background()
	cf, err := f.add(ctx, protocol.FilesAdd{Path: "/d/x", Site: "a"})
	if err != nil || len(cat.added) != 1 || cat.added[0] != (protocol.Replica{Site: "a", Size: int64(len(data)), SHA256: sum}) || cf.SHA256 != sum {
		t.Fatalf("add: %+v %v (store got %+v)", cf, err, cat.added)
	}
	for _, req := range []protocol.FilesAdd{{Path: "/d/y", Site: "a"}, {Path: "/d/x"}, {Path: "/d/x", Site: "nowhere"}, {Path: "/d", Site: "a"}} {
		if _, err := f.add(ctx, req); err == nil {
			t.Errorf("add %+v accepted", req)
		}
	}
	cat.dropped = []catalog.Place{at("a"), at(catalog.LocalSite)}
	if _, err := f.remove(ctx, protocol.FilesRemove{Path: "/d/x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.read("a", "/d/x"); err == nil {
		t.Error("the dropped replica at a is still there")
	}
	if got, err := tp.read(catalog.LocalSite, "/d/x"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the user's own file on the CLS host: %q %v", got, err)
	}
}

// siteSpecs is a site.Store holding specs.
type siteSpecs []protocol.SiteSpec

func (s siteSpecs) AddSite(context.Context, protocol.SiteSpec) error { return nil }
func (s siteSpecs) RemoveSite(context.Context, string) error         { return nil }
func (s siteSpecs) Sites(context.Context) ([]protocol.SiteSpec, error) {
	return s, nil
}
func (s siteSpecs) SiteDemand(context.Context, float64, []int64, int) (int, int, error) {
	return 0, 0, nil
}
func (s siteSpecs) PlaceholderGone(context.Context, int64) error { return nil }

// The CLS host's filesystem is the place of the local site, of local-type
// sites and of sites sharing it; any other site is its data root on its
// login host (here unreachable), one place per site.
func TestSitePlaces(t *testing.T) {
	specs := siteSpecs{
		{Name: "here", Type: site.Local, Max: 1, SharedFS: true},
		{Name: "shared", Type: site.Slurm, SSH: "u@h", Max: 1, SharedFS: true},
		{Name: "rooted", Type: site.Slurm, SSH: "u@h", Max: 1, DataRoot: "/scratch/mq"},
		{Name: "nodes", Type: site.Slurm, SSH: "u@h", Max: 1, DataRoot: "/tmp/mq", NodeLocal: true},
	}
	s := &sites{hub: newAgentHub(), umask: 0o027}
	s.mgr = &site.Manager{Store: specs, Poll: time.Hour, Log: slog.New(slog.DiscardHandler),
		Open: func(spec protocol.SiteSpec, _ func(int)) (site.Site, error) {
			return &site.Remote{Spec: spec, Dial: func(context.Context) (login.Runner, error) {
				return nil, errors.New("no login host in this test")
			}}, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.mgr.Stop()
	for _, tc := range []struct {
		at   catalog.Place
		host bool
		err  string
	}{
		{catalog.Place{Site: catalog.LocalSite, Host: "h1"}, true, ""},
		{at("here"), true, ""},
		{at("shared"), true, ""},
		{at("rooted"), false, "no login host in this test"},
		{catalog.Place{Site: "rooted", Host: "n1"}, false, "a place there has no host"},
		{at("nodes"), false, "a place there names its host"},
		{at("nowhere"), false, "no site nowhere"},
	} {
		pl, host, err := s.place(ctx, tc.at)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: %v; want %q", tc.at, err, tc.err)
			}
			continue
		}
		// The CLS host's filesystem, made with the user's umask (the
		// CLS's own is 077).
		if d, ok := pl.(stage.Dir); err != nil || !host || !ok || d.Root != "/" || d.Umask == nil || *d.Umask != 0o027 {
			t.Errorf("%+v: %#v %v %v; want the CLS host's filesystem with umask 027", tc.at, pl, host, err)
		}
	}
	// A host of a node-local site is reached through its placeholders.
	pl, host, err := s.place(ctx, catalog.Place{Site: "nodes", Host: "n1"})
	if err != nil || host || pl != (agentPlace{hub: s.hub, site: "nodes", host: "n1"}) {
		t.Errorf("nodes:n1: %#v %v %v; want the agent path to n1", pl, host, err)
	}
}
