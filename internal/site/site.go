// Package site is about sites: the places placeholders run. A site is the
// local machine, or a cluster reached over SSH whose own batch system (Son
// of Grid Engine, Slurm, PBS) runs placeholders as ordinary batch jobs. The
// CLS's Manager keeps each site supplied with placeholders while there is
// work they can take; Decide is the pure rule it follows. What differs
// between batch systems is package site/batch.
package site

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/shellwords"
	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/internal/wire"
	"github.com/mq-hpc/mq/protocol"
)

// Types of site.
const (
	Local = "local"
	SGE   = "sge"
	Slurm = "slurm"
	PBS   = "pbs"
)

// EmbeddedName is the name of the CLS's own site of local placeholders
// (cls serve --local N). It is reserved: no stored site may take it.
const EmbeddedName = "local"

// Connect modes of a remote site.
const (
	Direct = "direct" // compute nodes reach the CLS's SSH port
	Tunnel = "tunnel" // they reach it through a reverse forward on the login host
)

// Site is where placeholders are started, watched and cancelled. Calls
// may block on the network; ctx bounds them.
type Site interface {
	// Submit starts n more placeholders and returns their ids.
	Submit(ctx context.Context, n int) ([]string, error)
	// List returns the placeholders of this site that have not ended. An
	// error means the list is unknown, never that it is empty.
	List(ctx context.Context) ([]batch.Placeholder, error)
	// Cancel stops placeholders by id (queued ones never start).
	Cancel(ctx context.Context, ids []string) error
	// Close releases connections; placeholders keep running.
	Close() error
}

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,31}$`)

// ProvisionNames lists the policies a site may follow (--provision).
func ProvisionNames() []string {
	var out []string
	for _, p := range policy.All() {
		if p.Kind == policy.Provisioning {
			out = append(out, p.Name)
		}
	}
	return out
}

// Validate checks a site's settings and fills defaults. Errors name the
// setting as the command-line flag that sets it.
func Validate(s *protocol.SiteSpec) error {
	if !nameRE.MatchString(s.Name) {
		return fmt.Errorf("site name %q: want a letter then up to 31 letters, digits, '-' or '_'", s.Name)
	}
	if s.Embedded {
		return errors.New("an embedded site is made only by cls serve --local N")
	}
	if s.Name == EmbeddedName {
		return fmt.Errorf("site name %s is reserved for the CLS's own placeholders (cls serve --local N); choose another name", EmbeddedName)
	}
	switch s.Type {
	case Local, SGE, Slurm, PBS:
	case "":
		return errors.New("--type is required (local, sge, slurm or pbs)")
	default:
		return fmt.Errorf("--type %q: want local, sge, slurm or pbs", s.Type)
	}
	if s.Type == Local {
		for flag, v := range map[string]string{"ssh": s.SSH, "jump": s.Jump, "key": s.Key, "known-hosts": s.KnownHosts, "queue": s.Queue, "submit-args": s.SubmitArgs, "connect": s.Connect, "cls-addr": s.CLSAddr} {
			if v != "" {
				return fmt.Errorf("--%s is only for remote sites (sge, slurm, pbs)", flag)
			}
		}
	} else {
		if s.SSH == "" {
			return fmt.Errorf("--ssh user@login-host[:port] is required for a %s site", s.Type)
		}
		if err := validLogin(s); err != nil {
			return err
		}
		switch s.Connect {
		case "":
			s.Connect = Direct
		case Direct, Tunnel:
		default:
			return fmt.Errorf("--connect %q: want direct or tunnel", s.Connect)
		}
		if err := validCLSAddr(s); err != nil {
			return err
		}
		// The queue is a word of a directive line (#$ -q, #SBATCH
		// --partition=, #PBS -q): a control character there (\r, \v) could
		// end the word or the line, as a blank or a newline would.
		if strings.ContainsAny(s.Queue, " \t\n'\"\\$`;|&<>") || strings.ContainsFunc(s.Queue, unicode.IsControl) {
			return fmt.Errorf("--queue %q: not a queue name", s.Queue)
		}
		if _, err := SplitArgs(s.SubmitArgs); err != nil {
			return fmt.Errorf("--submit-args: %w", err)
		}
	}
	if err := validDataRoot(s); err != nil {
		return err
	}
	if s.Max == 0 {
		s.Max = max(s.Min, 1)
	}
	if s.Min < 0 || s.Max < 1 || s.Min > s.Max || s.Max > 10000 {
		return fmt.Errorf("--min %d --max %d: want 0 <= min <= max, 1 <= max <= 10000", s.Min, s.Max)
	}
	if s.Slots == 0 {
		s.Slots = 1
	}
	if s.Slots < 1 || s.Slots > 4096 {
		return fmt.Errorf("--slots must be 1..4096, not %d", s.Slots)
	}
	if err := validResources(s); err != nil {
		return err
	}
	if !(s.Price >= 0 && s.Price <= protocol.MaxBudget) { // also NaN
		return fmt.Errorf("--price must be 0..%g per core-hour (0 = free), not %g", float64(protocol.MaxBudget), s.Price)
	}
	if s.Provision != "" {
		p, err := policy.Lookup(s.Provision)
		if err != nil || p.Kind != policy.Provisioning {
			return fmt.Errorf("--provision %q: want one of %s (or none: the demand rule)", protocol.Printable(s.Provision), strings.Join(ProvisionNames(), ", "))
		}
	}
	switch s.Output {
	case "", protocol.OutputModeFiles, protocol.OutputModeStreams:
	default:
		return fmt.Errorf("--output %q: want files or streams", protocol.Printable(s.Output))
	}
	if s.PE != "" {
		if s.Type != SGE {
			return errors.New("--pe is only for sge sites (the parallel environment of a placeholder with --slots > 1)")
		}
		if s.Slots <= 1 {
			return errors.New("--pe needs --slots > 1 (a placeholder with one slot asks for no parallel environment)")
		}
		if err := validPE(s.PE); err != nil {
			return err
		}
	} else if s.Type == SGE && s.Slots > 1 {
		s.PE = batch.DefaultPE
	}
	if s.Walltime == 0 {
		s.Walltime = 3600
	}
	if !(s.Walltime >= 60 && s.Walltime <= 366*24*3600) { // also NaN
		return fmt.Errorf("--walltime must be between 1m and 366 days, not %gs", s.Walltime)
	}
	if s.Idle == 0 {
		s.Idle = 60
	}
	if !(s.Idle >= 1 && s.Idle <= s.Walltime) {
		return fmt.Errorf("--idle must be between 1s and the walltime, not %gs", s.Idle)
	}
	if s.ConnectTimeout != 0 && !(s.ConnectTimeout >= 1 && s.ConnectTimeout <= s.Walltime) { // also NaN
		return fmt.Errorf("--connect-timeout must be between 1s and the walltime, not %gs", s.ConnectTimeout)
	}
	return nil
}

// validCLSAddr checks --cls-addr, HOST or HOST:PORT (an IPv6 address in
// brackets): a direct site's only, as a tunnel's placeholders reach the
// CLS through the login host. The host goes into the batch script
// quoted, but a name with a space or a quote is no host's either.
func validCLSAddr(s *protocol.SiteSpec) error {
	a := s.CLSAddr
	if a == "" {
		return nil
	}
	if s.Connect == Tunnel {
		return errors.New("--cls-addr is for --connect direct: a tunnel's placeholders reach the CLS through the login host")
	}
	host, port, err := SplitCLSAddr(a)
	if err != nil {
		return err
	}
	if !hostRE.MatchString(host) && net.ParseIP(strings.Trim(host, "[]")) == nil {
		return fmt.Errorf("--cls-addr %q: want HOST or HOST:PORT, with HOST a name or an IP address", protocol.Printable(a))
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("--cls-addr %q: the port must be 1..65535", protocol.Printable(a))
		}
	}
	return nil
}

// hostRE is a DNS name as placeholders would dial it.
var hostRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*\.?$`)

// SplitCLSAddr splits --cls-addr into its host and port ("" when it
// names none: the CLS's --ssh port is meant).
func SplitCLSAddr(a string) (host, port string, err error) {
	if len(a) > 255 {
		return "", "", fmt.Errorf("--cls-addr: longer than 255 bytes")
	}
	if h, p, err := net.SplitHostPort(a); err == nil {
		return h, p, nil
	}
	if strings.Count(a, ":") > 1 && !strings.HasPrefix(a, "[") { // a bare IPv6 address
		return a, "", nil
	}
	if strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]") {
		return a[1 : len(a)-1], "", nil
	}
	if strings.Contains(a, ":") {
		return "", "", fmt.Errorf("--cls-addr %q: want HOST or HOST:PORT", protocol.Printable(a))
	}
	return a, "", nil
}

// CLSAddrFor is where a direct site's placeholders dial the CLS: def
// (its --ssh address as this host names it) with the site's --cls-addr
// over it, its port def's when it names none.
func CLSAddrFor(spec protocol.SiteSpec, def string) string {
	if spec.CLSAddr == "" || def == "" {
		return def
	}
	host, port, err := SplitCLSAddr(spec.CLSAddr)
	if err != nil {
		return def // Validate refused it already
	}
	if port == "" {
		_, port, _ = net.SplitHostPort(def)
	}
	return net.JoinHostPort(host, port)
}

// MaxSiteMem bounds --mem: larger is a typo, not a node.
const MaxSiteMem = 1 << 50 // 1 PiB

// validResources checks what each placeholder asks for besides its
// cores: --mem, --gpus, --resource.
func validResources(s *protocol.SiteSpec) error {
	if s.Mem < 0 || s.Mem > MaxSiteMem {
		return fmt.Errorf("--mem must be 0..1P (0 = the batch system's default), not %d bytes", s.Mem)
	}
	if s.GPUs < 0 || s.GPUs > resource.MaxGPUs {
		return fmt.Errorf("--gpus must be 0..%d, not %d", resource.MaxGPUs, s.GPUs)
	}
	if s.Type == Local && s.GPUs > 0 && s.Max > 1 {
		// Each placeholder would offer the same GPUs of the one machine.
		return fmt.Errorf("--gpus on a local site needs --max 1 (its placeholders share this machine's GPUs), not --max %d", s.Max)
	}
	named, err := ParseResources(s.Resources)
	if err != nil {
		return err
	}
	s.Resources = FormatResources(named)
	return nil
}

// ParseResources reads a site's named amounts, "NAME=N,NAME=N".
func ParseResources(s string) (map[string]int, error) { return wire.SiteResources(s) }

// FormatResources writes named amounts as SiteSpec.Resources keeps them:
// "NAME=N,NAME=N", by name.
func FormatResources(named map[string]int) string {
	names := make([]string, 0, len(named))
	for name := range named {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		names[i] = name + "=" + strconv.Itoa(named[name])
	}
	return strings.Join(names, ",")
}

// Capacity is what each of a site's placeholders asks for: its cores
// (Slots), memory, GPUs (ids 0..N-1 until the placeholder detects its
// own) and named amounts.
func Capacity(s protocol.SiteSpec) resource.Capacity { return wire.SiteCapacity(s) }

// AgentArgs are the agent's flags for what a placeholder of s asks for,
// so that it offers no more than its site says (--gpus 0 included: GPUs
// a variable names are not the site's).
func AgentArgs(s protocol.SiteSpec, mem int64) []string {
	args := []string{"--slots", strconv.Itoa(s.Slots), "--gpus", strconv.Itoa(s.GPUs)}
	if mem > 0 {
		args = append(args, "--mem", MemArg(mem))
	}
	if s.Resources != "" {
		for _, kv := range strings.Split(s.Resources, ",") {
			args = append(args, "--resource", kv)
		}
	}
	return args
}

// MemArg writes a byte count as the agent's --mem reads it, exactly
// where it can: "8192M", else KiB rounded up.
func MemArg(n int64) string {
	if n%resource.MiB == 0 {
		return strconv.FormatInt(n/resource.MiB, 10) + "M"
	}
	return strconv.FormatInt((n+resource.KiB-1)/resource.KiB, 10) + "K"
}

// MaxDataRoot bounds --data-root (PATH_MAX).
const MaxDataRoot = 4096

// validDataRoot checks where a site keeps staged files (DESIGN.md, "Data
// staging"). A local site runs on the CLS host, so it always shares its
// filesystem; a remote one either shares it (--shared-fs) or has a data
// root on its login host, absolute or relative to the login home ("" =
// .mq-data/CLSID). The root is given to the agent on a command line and
// used as a prefix of every staged path: no control characters, no "..".
func validDataRoot(s *protocol.SiteSpec) error {
	if s.NodeLocal && (s.Type == Local || s.SharedFS) {
		return errors.New("--node-local is for remote sites with a data root (not local, not --shared-fs): their nodes keep files on their own disks")
	}
	if s.Type == Local {
		if s.DataRoot != "" {
			return errors.New("--data-root is only for remote sites (a local site shares the CLS host's filesystem)")
		}
		s.SharedFS = true
		return nil
	}
	if s.DataRoot == "" {
		return nil
	}
	if s.SharedFS {
		return errors.New("--data-root and --shared-fs exclude each other (a site that shares the CLS host's filesystem keeps files where they are)")
	}
	if len(s.DataRoot) > MaxDataRoot {
		return fmt.Errorf("--data-root: %d bytes, at most %d", len(s.DataRoot), MaxDataRoot)
	}
	for i := 0; i < len(s.DataRoot); i++ {
		if c := s.DataRoot[i]; c < ' ' || c == 0x7f {
			return fmt.Errorf("--data-root %q: control character %q", s.DataRoot, c)
		}
	}
	for _, e := range strings.Split(s.DataRoot, "/") {
		if e == ".." {
			return fmt.Errorf("--data-root %q: no \"..\" please", s.DataRoot)
		}
	}
	if path.Clean(s.DataRoot) == "/" || path.Clean(s.DataRoot) == "." {
		return fmt.Errorf("--data-root %q: the data root must be a directory of its own (use --shared-fs for a site that shares the CLS host's filesystem)", s.DataRoot)
	}
	return nil
}

// validPE checks a parallel environment name as sge_types(5) defines an
// object name (up to 512 printable ASCII characters but space and
// /:'\[]{}|()@%," ), where qsub -pe also takes the wildcards * and ?.
func validPE(pe string) error {
	if len(pe) > 512 {
		return fmt.Errorf("--pe: a parallel environment name has at most 512 characters, not %d", len(pe))
	}
	for i := 0; i < len(pe); i++ {
		if c := pe[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`/:'\[]{}|()@%,"`, c) >= 0 {
			return fmt.Errorf("--pe %q: not a parallel environment name (%q is not allowed)", pe, c)
		}
	}
	return nil
}

// ParseSSH splits user@host[:port] into the user and a dialable address.
func ParseSSH(s string) (user, addr string, err error) {
	return parseUserHost("ssh", "user@login-host[:port]", s)
}

// validLogin checks how s reaches its login host: --ssh and --jump as
// user@host[:port], or, with --openssh, as ssh's destinations, whose
// user ssh's config may give.
func validLogin(s *protocol.SiteSpec) error {
	if !s.OpenSSH {
		if _, _, err := ParseSSH(s.SSH); err != nil {
			return err
		}
		if s.Jump != "" {
			if _, _, err := ParseJump(s.Jump); err != nil {
				return err
			}
		}
		return nil
	}
	if _, _, _, err := ParseDest("ssh", s.SSH); err != nil {
		return err
	}
	if s.Jump != "" {
		if _, _, _, err := ParseDest("jump", s.Jump); err != nil {
			return err
		}
	}
	for flag, p := range map[string]string{"key": s.Key, "known-hosts": s.KnownHosts} {
		if strings.ContainsAny(p, "\"'") {
			return fmt.Errorf("--%s %q: with --openssh, a path without quotes", flag, p)
		}
	}
	return nil
}

// ParseDest parses flag's value s, an ssh destination [user@]host[:port]
// (host a Host of the user's ssh config, or a name or address; port 0:
// ssh's).
func ParseDest(flag, s string) (user, host string, port int, err error) {
	want := fmt.Errorf("--%s %q: want [user@]host[:port] (a host of your ssh config, or a name or address)", flag, s)
	if u, h, ok := strings.Cut(s, "@"); ok {
		user, s = u, h
		if user == "" {
			return "", "", 0, want
		}
	}
	if strings.HasPrefix(s, "[") { // [v6]:port
		if i := strings.LastIndex(s, "]:"); i > 0 {
			if port, err = parsePort(s[i+2:]); err != nil || port == 0 {
				return "", "", 0, want
			}
			s = s[1:i]
		}
		s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	} else if h, p, ok := strings.Cut(s, ":"); ok && !strings.Contains(p, ":") {
		if port, err = parsePort(p); err != nil || port == 0 {
			return "", "", 0, want
		}
		s = h
	}
	// An allow-list: the name also reaches ssh's ProxyCommand (%h),
	// which a shell runs.
	word := func(w, extra string) bool {
		return w != "" && !strings.HasPrefix(w, "-") && !strings.ContainsFunc(w, func(r rune) bool {
			return !(r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)) || strings.ContainsRune("._-"+extra, r))
		})
	}
	if !word(s, ":") || user != "" && !word(user, "+") {
		return "", "", 0, want
	}
	return user, s, port, nil
}

// ParseJump is ParseSSH for a site's --jump, user@jump-host[:port].
func ParseJump(s string) (user, addr string, err error) {
	return parseUserHost("jump", "user@jump-host[:port]", s)
}

// parseUserHost parses flag's value s, user@host[:port] (want, for errors).
func parseUserHost(flag, want, s string) (user, addr string, err error) {
	user, host, ok := strings.Cut(s, "@")
	if !ok || user == "" || host == "" {
		return "", "", fmt.Errorf("--%s %q: want %s", flag, s, want)
	}
	port := "22"
	if h, p, ok := strings.Cut(host, ":"); ok && !strings.Contains(p, ":") {
		host, port = h, p
	} else if strings.HasPrefix(host, "[") { // [v6]:port
		if i := strings.LastIndex(host, "]:"); i > 0 {
			host, port = host[1:i], host[i+2:]
		}
	}
	if host == "" || strings.ContainsAny(host, " /@") || strings.ContainsAny(user, " :/") || strings.ContainsFunc(s, unicode.IsControl) {
		return "", "", fmt.Errorf("--%s %q: want %s", flag, s, want)
	}
	if n, err := parsePort(port); err != nil || n == 0 {
		return "", "", fmt.Errorf("--%s %q: bad port %q", flag, s, port)
	}
	if strings.Contains(host, ":") {
		return user, "[" + host + "]:" + port, nil
	}
	return user, host + ":" + port, nil
}

func parsePort(p string) (int, error) {
	n := 0
	if p == "" || len(p) > 5 {
		return 0, errors.New("bad port")
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, errors.New("bad port")
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, errors.New("bad port")
	}
	return n, nil
}

// ForType returns the batch system of a site type (nil for local).
func ForType(typ string) batch.System {
	switch typ {
	case SGE:
		return batch.SGE{}
	case Slurm:
		return batch.Slurm{}
	case PBS:
		return batch.PBS{}
	}
	return nil
}

// Quote quotes s for a POSIX shell (shellwords.Quote).
func Quote(s string) string { return shellwords.Quote(s) }

// SplitArgs splits --submit-args into words like a shell would, without
// expanding anything (shellwords.Split): the words are passed to
// qsub/sbatch quoted, so they can never run as commands on the login host.
// Control characters other than blanks are refused: they have no place in
// a batch system's options.
func SplitArgs(s string) ([]string, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t' && c != '\n') || c == 0x7f {
			return nil, fmt.Errorf("control character %q", c)
		}
	}
	return shellwords.Split(s)
}

// OpenSSHFor is how the system's ssh reaches spec's login host (spec
// valid, with OpenSSH set); the master sockets live in controlDir.
func OpenSSHFor(spec protocol.SiteSpec, controlDir string) login.OpenSSHConfig {
	user, host, port, _ := ParseDest("ssh", spec.SSH)
	if user != "" {
		host = user + "@" + host
	}
	return login.OpenSSHConfig{Dest: host, Port: port, Jump: spec.Jump, KeyFile: spec.Key, KnownHosts: spec.KnownHosts,
		ControlDir: controlDir, LoginHint: "cls site login " + spec.Name}
}
