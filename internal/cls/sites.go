package cls

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/metaqueue/ledger"
	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/internal/placeholder/capacity"
	"github.com/mq-hpc/mq/internal/placeholder/spool"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/internal/site"
	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/internal/sshkey"
	"github.com/mq-hpc/mq/internal/sshserver"
	"github.com/mq-hpc/mq/internal/wire"
	"github.com/mq-hpc/mq/protocol"
)

// sites is the CLS's side of `cls site`: the site Manager, wired to the
// store, the protocol server (ops site.*) and the SSH endpoint.
type sites struct {
	home   string
	store  *metaqueue.Store
	log    *slog.Logger
	agents string // directory of mqagent-OS-ARCH binaries
	mgr    *site.Manager
	// Local placeholders' stdout and stderr (their warnings) go to
	// agentLog, the CLS's log; noop makes the CLS's own ones (--local)
	// report jobs without running them.
	agentLog io.Writer
	// logJSON: the log is JSON lines (cls serve --log-format json), so
	// local placeholders write theirs as JSON too.
	logJSON bool
	// connected are the placeholders connected now (the dashboard).
	connected connectedPHs
	noop      bool
	umask     int // local placeholders run their jobs with it
	// maxOutput (0: no cap) and outputReserve bound local jobs' output
	// (Config.MaxOutput, Config.OutputReserve).
	maxOutput, outputReserve int64
	// streams: local placeholders write jobs' output to stream files
	// (not Config.OutputFiles).
	streams, streamsSync bool
	agentExe             string        // what local placeholders run (default: this executable)
	reconnect            time.Duration // local placeholders' --reconnect (0: theirs)

	sshAddr net.Addr // the CLS's SSH endpoint; nil without --ssh
	hostFP  string
	clsID   string
	// sshSessions bounds the sessions of --openssh sites on each login
	// host's master, which those sites share.
	sshSessions login.Sessions

	// swept: sites whose data roots were swept of an earlier run's
	// temporary files (files.go, sweepOnce).
	sweepMu sync.Mutex
	swept   map[string]*sync.Once
	// rootOK: sites whose data roots passed stage.SFTP.CheckRoot in
	// this run (a failed check is made again at the next transfer).
	rootOK map[string]bool

	// hub moves files over placeholders' own connections (agentplace.go).
	hub *agentHub
	// stagingNote says why staging leaves a site alone (its data root
	// full), for cls site list.
	stagingNote func(site string) string
}

func newSites(home string, store *metaqueue.Store, log *slog.Logger, poll, throttle time.Duration, agents string) (*sites, error) {
	s := &sites{home: home, store: store, log: log, agents: agents, hub: newAgentHub()}
	hk, err := sshserver.LoadOrCreateHostKey(filepath.Join(home, sshserver.HostKeyFileName))
	if err != nil {
		return nil, err
	}
	s.hostFP = ssh.FingerprintSHA256(hk.PublicKey())
	sum := sha256.Sum256([]byte(s.hostFP))
	s.clsID = hex.EncodeToString(sum[:3])
	if s.agents == "" {
		if exe, err := os.Executable(); err == nil {
			s.agents = filepath.Dir(exe)
		}
	}
	s.mgr = &site.Manager{Store: siteStore{store, store.Planners()}, Open: s.open, Prepare: s.prepare, Forget: s.forget,
		Poll: poll, ThrottleAfter: throttle, Log: log}
	return s, nil
}

// siteStore is the store as the site manager uses it, with the ledger's
// side of the provisioning planners (site.EconStore, site.StageStore).
type siteStore struct {
	*metaqueue.Store
	ledger.Planners
}

var (
	_ site.EconStore   = siteStore{}
	_ site.StageStore  = siteStore{}
	_ site.BrokenStore = siteStore{}
)

// install serves the site ops on srv and tells the manager about
// placeholders that come and go. Call before srv serves.
func (s *sites) install(srv *server.Server) {
	prev := srv.OnPlaceholder
	srv.OnPlaceholder = func(id int64, reg protocol.Register, connected bool) {
		if prev != nil {
			prev(id, reg, connected)
		}
		s.mgr.Placeholder(id, reg, connected)
		s.hub.placeholder(id, reg.Site, reg.Host, connected)
	}
	srv.OnPaused = s.mgr.Paused
	srv.OnBroken = s.mgr.Broken
	srv.Files = s.hub
	server.Route(srv, protocol.OpSiteAdd, func(ctx context.Context, spec protocol.SiteSpec) (protocol.SiteInfo, error) {
		return s.shownOne(s.mgr.Add(ctx, spec))
	})
	server.Route(srv, protocol.OpSiteList, func(ctx context.Context, _ protocol.Empty) (protocol.SiteList, error) {
		list := s.shown(s.mgr.List())
		if err := s.withCuts(ctx, list); err != nil {
			return protocol.SiteList{}, err
		}
		return protocol.SiteList{Sites: list}, nil
	})
	server.Route(srv, protocol.OpSiteRemove, func(ctx context.Context, r protocol.SiteRemove) (protocol.SiteInfo, error) {
		return s.mgr.Remove(ctx, r.Name)
	})
	server.Route(srv, protocol.OpSiteSet, func(ctx context.Context, set protocol.SiteSet) (protocol.SiteInfo, error) {
		return s.shownOne(s.mgr.Set(ctx, set))
	})
	srv.SiteOutputFiles = s.outputFiles
}

// shown is list as cls site list shows it: with each site's staging note,
// and the data root a remote site gets when it names none (dataRoot).
func (s *sites) shown(list []protocol.SiteInfo) []protocol.SiteInfo {
	for i := range list {
		if s.stagingNote != nil {
			list[i].Staging = s.stagingNote(list[i].Name)
		}
		if list[i].Type != site.Local {
			list[i].DataRoot = s.dataRoot(list[i].SiteSpec)
		}
	}
	return list
}

// shownOne is shown for the one site an add or a set answers with.
func (s *sites) shownOne(info protocol.SiteInfo, err error) (protocol.SiteInfo, error) {
	if err != nil {
		return info, err
	}
	return s.shown([]protocol.SiteInfo{info})[0], nil
}

// withCuts adds to list what the store says of the remote sites that do
// not answer, and of their placeholders' leases it holds meanwhile
// (Store.SiteCuts). A list of local sites only does not ask the core.
func (s *sites) withCuts(ctx context.Context, list []protocol.SiteInfo) error {
	if !slices.ContainsFunc(list, func(si protocol.SiteInfo) bool { return si.Type != site.Local }) {
		return nil
	}
	cuts := map[string]placeholders.Cut{}
	if err := s.store.SiteCuts(ctx, cuts); err != nil {
		return err
	}
	for i := range list {
		c, ok := cuts[list[i].Name]
		if !ok {
			continue
		}
		list[i].Unreachable, list[i].HeldPlaceholders, list[i].HeldLeases = c.Down, c.Placeholders, c.Leases
		if c.Down {
			list[i].AnsweredAt = c.Answered
		}
		if c.Leases > 0 {
			list[i].HeldUntil = c.Until
		}
	}
	return nil
}

// dataRoot is where files staged at a remote site live on its login host:
// its --data-root, or under .mq-data by this CLS's id, so that two CLSs
// never share one; "" for a site that shares the CLS's filesystem.
func (s *sites) dataRoot(spec protocol.SiteSpec) string {
	if spec.DataRoot == "" && !spec.SharedFS {
		return site.DefaultDataRoot + "/" + s.clsID
	}
	return spec.DataRoot
}

// outputFiles is a site's output mode, when it has one of its own (cls
// site add --output): a file per output or stream files.
func (s *sites) outputFiles(name string) (files, ok bool) {
	spec, _, found := s.mgr.Site(name)
	if !found || spec.Output == "" {
		return false, false
	}
	return spec.Output == protocol.OutputModeFiles, true
}

func (s *sites) start(ctx context.Context) error { return s.mgr.Start(ctx) }

// stop stops the sites: local placeholders too, unless keep (their jobs
// run on and are reported to the next CLS).
func (s *sites) stop(keep bool) {
	if keep {
		s.mgr.StopLeaving()
	} else {
		s.mgr.Stop()
	}
}

func (s *sites) dir(name string) string { return filepath.Join(s.home, "sites", name) }

// prepare makes a site's placeholder key and accepts it. A remote site is
// refused on a CLS without an SSH endpoint: its placeholders could never
// connect, in either connect mode.
func (s *sites) prepare(spec protocol.SiteSpec) error {
	if spec.Type != site.Local && s.sshAddr == nil {
		return protocol.Errorf(protocol.CodeBadRequest, "site %s (--connect %s): %v", spec.Name, spec.Connect, site.ErrNoEndpoint)
	}
	dir := s.dir(spec.Name)
	os.RemoveAll(dir) // left by an add that failed
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	comment := sshserver.SiteKeyPrefix + spec.Name
	pk, err := sshkey.NewKeyPair(filepath.Join(dir, "placeholder_key"), comment)
	if err != nil {
		return err
	}
	kf := sshserver.NewKeyFile(filepath.Join(s.home, sshserver.KeyFileName))
	kf.Remove(comment)
	if _, err := kf.Add(protocol.RolePlaceholder, pk, comment); err != nil {
		return err
	}
	return nil
}

func (s *sites) forget(spec protocol.SiteSpec) {
	kf := sshserver.NewKeyFile(filepath.Join(s.home, sshserver.KeyFileName))
	kf.Remove(sshserver.SiteKeyPrefix + spec.Name)
	os.RemoveAll(s.dir(spec.Name))
}

// open makes the Site of a spec.
func (s *sites) open(spec protocol.SiteSpec, exited func(pid int)) (site.Site, error) {
	wall := protocol.Duration(spec.Walltime)
	if spec.Type == site.Local {
		exe := s.agentExe
		if exe == "" {
			var err error
			if exe, err = os.Executable(); err != nil {
				return nil, fmt.Errorf("cannot find the cls executable for local placeholders: %w", err)
			}
		}
		host, _ := os.Hostname()
		args := append([]string{"agent", "--site", spec.Name, "--host", host}, site.AgentArgs(spec, localMem(spec))...)
		if !spec.Embedded { // the CLS's own are always there: no time limit, never idle out
			args = append(args, "--walltime", wire.AgentWalltime(wall).String(),
				"--idle", protocol.Duration(spec.Idle).String())
		}
		out := filepath.Join(s.home, "output")
		args = append(args, "--out", out, "--orphan-exit", "--umask", fmt.Sprintf("%03o", s.umask),
			"--max-output", strconv.FormatInt(s.maxOutput, 10), "--output-reserve", strconv.FormatInt(s.outputReserve, 10))
		if spec.Output == protocol.OutputModeStreams || spec.Output == "" && s.streams {
			args = append(args, "--streams", "--streams-sync="+strconv.FormatBool(s.streamsSync))
		}
		// Under --output files no flag: the agent hears it when it
		// registers (RegisterReply.OutputFiles), as a remote one does
		// (the site's own --output first).
		if spec.Embedded && s.noop {
			args = append(args, "--noop")
		}
		if s.logJSON {
			args = append(args, "--log-format", "json")
		}
		if s.reconnect > 0 {
			args = append(args, "--reconnect", s.reconnect.String())
		}
		// A killed predecessor's agents (--out names this home) run on
		// until their jobs end, holding their share of the machine.
		orphans := site.AgentOrphans(os.DirFS("/proc"), os.Getuid(), spec.Name, out)
		return &site.Processes{Exited: exited, Orphans: orphans, Command: func() *exec.Cmd {
			cmd := exec.Command(exe, args...)
			cmd.Env = append(os.Environ(), "MQ_HOME="+s.home)
			cmd.Dir = s.home
			w := s.agentLog
			if lf, ok := w.(*logFile); ok {
				w = lf.file() // the file itself, as it is now (ReopenLog)
			}
			cmd.Stdout, cmd.Stderr = w, w
			return cmd
		}}, nil
	}
	key, err := mqhome.ReadFile(filepath.Join(s.dir(spec.Name), "placeholder_key"))
	if err != nil {
		return nil, fmt.Errorf("site %s: placeholder key: %w", spec.Name, err)
	}
	spec.DataRoot = s.dataRoot(spec)
	var user, addr, jumpUser, jumpAddr string
	if !spec.OpenSSH {
		if user, addr, err = site.ParseSSH(spec.SSH); err != nil {
			return nil, err
		}
	}
	if spec.Jump != "" && !spec.OpenSSH {
		if jumpUser, jumpAddr, err = site.ParseJump(spec.Jump); err != nil {
			return nil, err
		}
	}
	dial := func(ctx context.Context) (login.Runner, error) {
		return login.DialSSH(ctx, login.SSHConfig{User: user, Addr: addr, JumpUser: jumpUser, JumpAddr: jumpAddr, KeyFile: spec.Key, KnownHosts: spec.KnownHosts})
	}
	if spec.OpenSSH {
		cfg := site.OpenSSHFor(spec, login.ControlDir(s.home))
		cfg.Program = os.Getenv("MQ_SSH") // as cls site login runs it
		cfg.ForwardName = site.JobName(spec.Name, s.clsID)
		cfg.Sessions = &s.sshSessions
		d := &login.OpenSSHDialer{Config: cfg}
		dial = func(ctx context.Context) (login.Runner, error) {
			s, err := d.Dial(ctx)
			if err != nil {
				return nil, err // not a nil *OpenSSH in a Runner
			}
			return s, nil
		}
	}
	r := &site.Remote{Spec: spec, Batch: site.ForType(spec.Type), Key: key, HostKey: s.hostFP,
		JobName: site.JobName(spec.Name, s.clsID), Dir: ".mq-sites/" + s.clsID, Log: s.log,
		Agent: s.agentBinary,
		Dial:  dial,
	}
	// What its placeholders spooled is theirs alone to report: a
	// placeholder of another site named there is refused.
	r.Reports = func(ctx context.Context, f spool.File) error {
		return spool.CheckRefused(s.store.ReportSpooled(ctx, f.Placeholder, f.Reports, func(name string) bool { return name == spec.Name }))
	}
	if s.sshAddr != nil {
		r.CLSAddr = advertised(s.sshAddr)
		local := s.sshAddr.String()
		r.DialCLS = func() (net.Conn, error) { return net.DialTimeout("tcp", local, 10*time.Second) }
	}
	return r, nil
}

// localMem is the memory each placeholder of a local site asks for: the
// site's --mem, else, for the CLS's own (cls serve --local N), an equal
// share of this machine's, so that N of them never promise its memory N
// times over. 0: not asked (the agent then offers what it detects).
func localMem(spec protocol.SiteSpec) int64 {
	if spec.Mem > 0 || !spec.Embedded || spec.Max < 1 {
		return spec.Mem
	}
	g := capacity.Detect(os.Getenv, os.DirFS("/"), nil)
	return g.Mem / int64(spec.Max)
}

// advertised is the address placeholders dial for a listening address: a
// wildcard listener is reached by this host's name.
func advertised(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// agentBinary finds the agent to upload for a platform: mqagent-OS-ARCH in
// the agents directory; for this host's own platform also mqagent there,
// or this cls binary itself (it runs `cls agent` just the same).
func (s *sites) agentBinary(goos, goarch string) (string, error) {
	cands := []string{filepath.Join(s.agents, "mqagent-"+goos+"-"+goarch)}
	if goos == runtime.GOOS && goarch == runtime.GOARCH {
		cands = append(cands, filepath.Join(s.agents, "mqagent"))
		if exe, err := os.Executable(); err == nil {
			cands = append(cands, exe)
		}
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c, nil
		}
	}
	return "", errors.New("no agent binary for " + goos + "/" + goarch + ": build one with scripts/build-agents.sh into " + s.agents + " (mqagent-" + goos + "-" + goarch + ")")
}
