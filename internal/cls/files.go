package cls

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/internal/site"
	"github.com/mq-hpc/mq/internal/stage"
	"github.com/mq-hpc/mq/protocol"
)

// local is the CLS host's own files as a place: made with the user's
// umask, not the CLS's 077, as the user's other files are.
func (s *sites) local() stage.Dir {
	um := fs.FileMode(s.umask)
	return stage.Dir{Root: "/", Umask: &um}
}

// place resolves a place of the catalog for data staging: the local site
// and sites sharing the CLS host's filesystem are that filesystem; a site
// whose nodes share no filesystem (NodeLocal) is a place per host, the
// data root on that host, reached through a placeholder there over its
// own connection (agentplace.go); any other site is its data root on its
// login host, over the SFTP session of the connection the site manager
// keeps (made again when lost).
func (s *sites) place(ctx context.Context, p catalog.Place) (stage.Place, bool, error) {
	if p.Site == catalog.LocalSite {
		return s.local(), true, nil
	}
	spec, st, ok := s.mgr.Site(p.Site)
	if !ok {
		return nil, false, &noSiteError{p.Site}
	}
	if spec.Type == site.Local || spec.SharedFS {
		return s.local(), true, nil
	}
	if spec.NodeLocal {
		if p.Host == "" {
			return nil, false, fmt.Errorf("site %s keeps files per host: a place there names its host", p.Site)
		}
		return agentPlace{hub: s.hub, site: p.Site, host: p.Host}, false, nil
	}
	if p.Host != "" {
		return nil, false, fmt.Errorf("site %s shares its filesystem between its nodes: a place there has no host (%s)", p.Site, p.Host)
	}
	r, ok := st.(*site.Remote)
	if !ok {
		return nil, false, fmt.Errorf("site %s: its login host cannot be reached for files", p.Site)
	}
	c, root, err := r.Files(ctx)
	if err != nil {
		return nil, false, &unreachableError{p.Site, err}
	}
	if root == "" {
		return nil, false, fmt.Errorf("site %s has no data root", p.Site)
	}
	pl := stage.SFTP{Client: c, Root: root, Writer: p.Site, Drop: func() bool { return r.CutFiles(c) }}
	if err := s.checkRoot(ctx, p.Site, pl); err != nil {
		return nil, false, err
	}
	if err := s.sweepOnce(ctx, p.Site, pl); err != nil {
		return nil, false, &unreachableError{p.Site, err}
	}
	return pl, false, nil
}

// checkRoot checks a site's data root on its login host before the CLS
// first writes there in this run (stage.SFTP.CheckRoot), and again at
// every transfer until it passes: a data root others could write is
// refused, its transfers fail with the reason.
func (s *sites) checkRoot(ctx context.Context, name string, pl stage.SFTP) error {
	s.sweepMu.Lock()
	ok := s.rootOK[name]
	s.sweepMu.Unlock()
	if ok {
		return nil
	}
	if err := pl.CheckRoot(ctx); err != nil {
		var unsafe *stage.UnsafeRootError
		if !errors.As(err, &unsafe) {
			// The connection failed meanwhile, not the check: the site
			// is unreachable, as any other transfer there would say.
			return &unreachableError{name, err}
		}
		s.log.Warn("refusing a site's data root", "site", name, "err", err)
		return fmt.Errorf("site %s: %w", name, err)
	}
	s.sweepMu.Lock()
	if s.rootOK == nil {
		s.rootOK = map[string]bool{}
	}
	s.rootOK[name] = true
	s.sweepMu.Unlock()
	return nil
}

// agentAlt is a place's second path: a site's data root, shared by its
// nodes and its login host, through the connection of one of its
// placeholders that takes files now (the stager measures both paths and
// takes the faster). Places per host have no second path: the agent's
// connection is their only one.
func (s *sites) agentAlt(p catalog.Place) (stage.Place, bool) {
	if p.Host != "" || p.Site == catalog.LocalSite {
		return nil, false
	}
	spec, _, ok := s.mgr.Site(p.Site)
	if !ok || spec.Type == site.Local || spec.SharedFS || spec.NodeLocal || !s.hub.reachable(p.Site, "") {
		return nil, false
	}
	return agentPlace{hub: s.hub, site: p.Site}, true
}

// sweepOnce removes, the first time a site's data root is used in this
// run of the CLS, the temporary files an earlier run left there (killed
// in the middle of transfers): before any transfer of this run, so none
// of them is taken for a leftover. Callers wait for it, at most the
// place's stall limit while the login host's SFTP server does not answer:
// then the sweep is given up, its SFTP session ended (or the connection
// under it cut: stage.ErrStalled), and it returns that error, to the
// caller that ran it, as the site's: the place it was given is on the
// session ended.
func (s *sites) sweepOnce(ctx context.Context, name string, pl stage.SFTP) error {
	s.sweepMu.Lock()
	if s.swept == nil {
		s.swept = map[string]*sync.Once{}
	}
	once := s.swept[name]
	if once == nil {
		once = &sync.Once{}
		s.swept[name] = once
	}
	s.sweepMu.Unlock()
	var stalled error
	once.Do(func() {
		n, err := pl.Sweep(ctx)
		switch {
		case err != nil:
			s.log.Warn("sweeping leftover temporary files", "site", name, "removed", n, "err", err)
			if errors.Is(err, stage.ErrStalled) {
				stalled = err
			}
		case n > 0:
			s.log.Info("removed temporary files left by an earlier run", "site", name, "files", n)
		}
	})
	return stalled
}

// unreachableError says a site's login host could not be reached for
// files: nothing is known about the files there.
type unreachableError struct {
	site string
	err  error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("site %s cannot be reached: %v", e.site, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// noSiteError says a place's site is not configured (any more): removed
// while transfers to its data root were on their way.
type noSiteError struct{ site string }

func (e *noSiteError) Error() string { return "no site " + e.site }

// filesStore is what the files.* ops need of the store.
type filesStore interface {
	Files(ctx context.Context, q protocol.FilesQuery) (protocol.FilesReply, error)
	Replicas(ctx context.Context, path string) ([]protocol.Replica, error)
	AddReplica(ctx context.Context, path string, at catalog.Place, size int64, sha256 string) (protocol.CatalogFile, error)
	RemoveReplicas(ctx context.Context, path, site string, force bool) (protocol.CatalogFile, []catalog.Place, error)
	RecordTransfer(ctx context.Context, t protocol.TransferInfo) error
}

// storeFiles is the store as the files ops and the stager use it: the
// catalog's listings from the read pool, its changes through the core.
type storeFiles struct {
	*metaqueue.Store
	catalog.Requests
}

func newStoreFiles(s *metaqueue.Store) storeFiles { return storeFiles{s, s.Catalog()} }

func (s storeFiles) Files(ctx context.Context, q protocol.FilesQuery) (protocol.FilesReply, error) {
	return catalog.Files(ctx, s.ReadDB(), q)
}

func (s storeFiles) Replicas(ctx context.Context, path string) ([]protocol.Replica, error) {
	return catalog.Holding(ctx, s.ReadDB(), path)
}

// files serves the files.* ops: the catalog, and copies made for users.
type files struct {
	store  filesStore
	places placeFunc
	home   string    // MQ_HOME: no file is copied into it
	local  stage.Dir // the CLS host's own files (sites.local)
	stager *stager
	log    *slog.Logger
	now    func() time.Time
}

func (f *files) install(srv *server.Server) {
	server.Route(srv, protocol.OpFilesList, f.store.Files)
	server.Route(srv, protocol.OpFilesGet, f.get)
	server.Route(srv, protocol.OpFilesAdd, f.add)
	server.Route(srv, protocol.OpFilesRemove, f.remove)
}

func badPath(p string) error {
	if err := protocol.CheckPath("path", p); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if _, err := stage.Rooted("/", p); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%s", protocol.Printable(err.Error()))
	}
	return nil
}

// get copies a file from a place holding it (req.Site's, else the
// catalog's best first, the next when one fails) to Dest on the CLS host,
// verified against the catalog's size and checksum. Dest must be
// absolute, outside MQ_HOME, and not exist: files.get never overwrites a
// file (so the copy of a file to its own path is refused while a replica
// is there already).
func (f *files) get(ctx context.Context, req protocol.FilesGet) (protocol.TransferInfo, error) {
	if err := badPath(req.Path); err != nil {
		return protocol.TransferInfo{}, err
	}
	dest := req.Dest
	if dest == "" {
		dest = req.Path
	}
	if !filepath.IsAbs(dest) || strings.IndexByte(dest, 0) >= 0 {
		return protocol.TransferInfo{}, protocol.Errorf(protocol.CodeBadRequest, "destination %q is not an absolute path", dest)
	}
	dest = filepath.Clean(dest)
	if rel, err := filepath.Rel(f.home, dest); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return protocol.TransferInfo{}, protocol.Errorf(protocol.CodeBadRequest, "destination %s is in MQ_HOME (%s)", dest, f.home)
	}
	if _, err := os.Lstat(dest); err == nil {
		return protocol.TransferInfo{}, protocol.Errorf(protocol.CodeBadState, "%s exists: files.get does not overwrite", dest)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return protocol.TransferInfo{}, err
	}
	reps, err := f.store.Replicas(ctx, req.Path)
	if err != nil {
		return protocol.TransferInfo{}, err
	}
	var from []protocol.Replica
	for _, r := range reps {
		if req.Site == "" || r.Site == req.Site {
			from = append(from, r)
		}
	}
	if len(from) == 0 {
		where := ""
		if req.Site != "" {
			where = " at site " + req.Site
		}
		return protocol.TransferInfo{}, protocol.Errorf(protocol.CodeNotFound, "no replica of %s%s", req.Path, where)
	}
	// The target is the CLS host's filesystem, with Path named Dest.
	const getPlace = "cls host (get)" // no site may be named so (a space)
	m := &stage.Mover{Log: f.log, Local: getPlace, Now: f.now}
	if f.stager != nil {
		m.Rates = &f.stager.rates
	}
	var errs []error
	for _, r := range from {
		at := catalog.Place{Site: r.Site, Host: r.Host}
		src, host, err := f.places(ctx, at)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.Places = func(name string) (stage.Place, error) {
			if name == getPlace {
				return renamed{f.local, req.Path, dest}, nil
			}
			return src, nil
		}
		started := f.now()
		res := m.Move(ctx, stage.Transfer{Path: req.Path, From: placeName(at), To: getPlace, Size: r.Size, SHA256: r.SHA256})
		ti := protocol.TransferInfo{Path: req.Path, From: placeName(at), To: catalog.LocalSite, Bytes: res.Bytes,
			Seconds: res.Duration.Seconds(), Started: started.UTC().Format(time.RFC3339Nano)}
		if res.Err != nil {
			ti.Error = res.Err.Error()
		}
		if err := f.store.RecordTransfer(ctx, ti); err != nil {
			f.log.Error("cannot record a transfer", "path", req.Path, "err", err)
		}
		if res.Err == nil {
			if !host && f.stager != nil {
				f.stager.pushLink(at)
			}
			return ti, nil
		}
		errs = append(errs, res.Err)
		if ctx.Err() != nil {
			break
		}
	}
	return protocol.TransferInfo{}, errors.Join(errs...)
}

// add registers a file that is at a site already: the CLS measures and
// hashes it there.
func (f *files) add(ctx context.Context, req protocol.FilesAdd) (protocol.CatalogFile, error) {
	if err := badPath(req.Path); err != nil {
		return protocol.CatalogFile{}, err
	}
	if req.Site == "" {
		return protocol.CatalogFile{}, protocol.Errorf(protocol.CodeBadRequest, "files.add needs the site holding %s", req.Path)
	}
	at := catalog.Place{Site: req.Site, Host: req.Host}
	pl, _, err := f.places(ctx, at)
	if err != nil {
		return protocol.CatalogFile{}, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	info, err := pl.Stat(ctx, req.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return protocol.CatalogFile{}, protocol.Errorf(protocol.CodeNotFound, "%s is not at %s", req.Path, placeName(at))
		}
		return protocol.CatalogFile{}, err
	}
	if !info.Regular {
		return protocol.CatalogFile{}, protocol.Errorf(protocol.CodeBadRequest, "%s at %s is not a regular file", req.Path, placeName(at))
	}
	sum, n, err := stage.HashFile(ctx, pl, req.Path)
	if err != nil {
		return protocol.CatalogFile{}, fmt.Errorf("at %s: %w", placeName(at), err)
	}
	return f.store.AddReplica(ctx, req.Path, at, n, sum)
}

// remove drops replicas from the catalog and deletes the files at the
// places dropped that are sites' data roots. A replica on the CLS host's
// filesystem (the local site, shared-filesystem sites) is only forgotten:
// the file there is the user's own, never deleted by the CLS.
func (f *files) remove(ctx context.Context, req protocol.FilesRemove) (protocol.CatalogFile, error) {
	if err := badPath(req.Path); err != nil {
		return protocol.CatalogFile{}, err
	}
	left, dropped, err := f.store.RemoveReplicas(ctx, req.Path, req.Site, req.Force)
	if err != nil {
		return protocol.CatalogFile{}, err
	}
	for _, at := range dropped {
		pl, host, err := f.places(ctx, at)
		if err == nil && !host {
			err = pl.Remove(ctx, req.Path)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			f.log.Warn("a dropped replica's file stays", "path", req.Path, "at", placeName(at), "err", err)
		}
	}
	return left, nil
}

// renamed is a Place where the file named from is at to.
type renamed struct {
	stage.Place
	from, to string
}

func (r renamed) name(p string) string {
	if p == r.from {
		return r.to
	}
	return p
}

func (r renamed) Open(ctx context.Context, p string) (io.ReadCloser, stage.Info, error) {
	return r.Place.Open(ctx, r.name(p))
}
func (r renamed) Stat(ctx context.Context, p string) (stage.Info, error) {
	return r.Place.Stat(ctx, r.name(p))
}
func (r renamed) Create(ctx context.Context, p string) (stage.Temp, error) {
	return r.Place.Create(ctx, r.name(p))
}
func (r renamed) Remove(ctx context.Context, p string) error { return r.Place.Remove(ctx, r.name(p)) }
