package protocol

import (
	"fmt"
	"time"
)

// LocalSite is the site name of the CLS's own placeholders, on the CLS
// host (cls serve --local).
const LocalSite = "local"

// SiteSpec is a site's settings, as `cls site add` gives them.
type SiteSpec struct {
	Name string `json:"name"`
	Type string `json:"type"`          // local, sge, slurm, pbs
	SSH  string `json:"ssh,omitempty"` // user@login-host[:port]
	// Jump is a jump host the login host is reached through
	// (user@jump-host[:port], as ssh -J); "" = none.
	Jump string `json:"jump,omitempty"`
	// OpenSSH: the CLS reaches the login host by running the system's
	// ssh, the user's ssh config applied, riding on a master connection
	// (cls site login) where the login host asks for a second factor.
	// SSH is then ssh's destination, [user@]host[:port], and Jump may
	// omit its user.
	OpenSSH    bool    `json:"openssh,omitempty"`
	Key        string  `json:"key,omitempty"`         // private key file on the CLS host; "" = ssh-agent, then ~/.ssh keys
	KnownHosts string  `json:"known_hosts,omitempty"` // "" = ~/.ssh/known_hosts
	Queue      string  `json:"queue,omitempty"`       // batch queue or partition
	Min        int     `json:"min"`
	Max        int     `json:"max"`
	Walltime   float64 `json:"walltime_s"` // each placeholder's time limit, seconds
	// Slots is each placeholder's cores (cls site add --slots or
	// --cpus): what it asks its batch system for, and as many 1-core
	// jobs as it runs at once.
	Slots int `json:"slots"`
	// Mem (bytes; 0: not asked, the batch system's default) and GPUs
	// are what each placeholder asks its batch system for besides its
	// cores and offers its jobs; Resources are site-declared amounts
	// (licences, scratch) each placeholder offers, which no batch system
	// is asked for, as "NAME=N,NAME=N" sorted by name (a string, so that
	// a SiteSpec stays comparable).
	Mem        int64  `json:"mem,omitempty"`
	GPUs       int    `json:"gpus,omitempty"`
	Resources  string `json:"resources,omitempty"`
	SubmitArgs string `json:"submit_args,omitempty"`
	Connect    string `json:"connect,omitempty"` // direct or tunnel
	// CLSAddr is where the site's compute nodes dial the CLS in direct
	// mode (cls site add --cls-addr), HOST or HOST:PORT, when the name the
	// CLS knows itself by is not one they can reach (a short hostname, a
	// NAT or a port forward); "" is the CLS's --ssh address, a wildcard
	// one by this host's name. A missing PORT is the --ssh port.
	CLSAddr string  `json:"cls_addr,omitempty"`
	Idle    float64 `json:"idle_s"` // a placeholder exits after this long without work
	// PE is the SGE parallel environment a placeholder with Slots > 1 asks
	// for (qsub -pe PE Slots); "" means "smp".
	PE string `json:"pe,omitempty"`
	// Embedded marks the CLS's own site, `cls serve --local N`: named
	// local, never stored, Min = Max = N placeholders always running
	// (no walltime, no idle timeout). Only the CLS sets it.
	Embedded bool `json:"embedded,omitempty"`
	// ConnectTimeout is how long a started placeholder may take to
	// connect before it is cancelled and the site marked degraded, in
	// seconds; 0 = the CLS's default (cls serve --connect-timeout).
	ConnectTimeout float64 `json:"connect_timeout_s,omitempty"`
	// Data staging: a site either shares the CLS host's filesystem
	// (SharedFS; the local site always does) or keeps the files it gets
	// under DataRoot on its login host (absolute, or relative to the
	// login home; "" = .mq-data/CLSID). See DESIGN.md, "Data staging".
	DataRoot string `json:"data_root,omitempty"`
	SharedFS bool   `json:"shared_fs,omitempty"`
	// NodeLocal says the site's nodes share no filesystem: each keeps its
	// files under DataRoot on its own disk, and a file is at a place per
	// host (site:host). Files reach a node over its placeholder's own
	// connection to the CLS, not over SFTP to the login host.
	NodeLocal bool `json:"node_local,omitempty"`
	// Price is what one core-hour at the site costs, in the unit queue
	// budgets are in; 0: free. Attempts there are charged at it
	// (docs/policies/dbc.md).
	Price float64 `json:"price,omitempty"`
	// Provision names the Provisioning policy the site's placeholders
	// follow (dbc-cost, dbc-costtime, dbc-time, lp): "" is the demand rule
	// (site.Decide). A site with one holds placeholders for the queues
	// with a deadline or a budget, as the policy plans them jointly over
	// every site that follows it.
	Provision string `json:"provision,omitempty"`
	// Output is how the site's placeholders keep jobs' stdout and stderr
	// (cls site add --output): OutputModeFiles, a file per output, or
	// OutputModeStreams, a few stream files per placeholder; "" is the
	// CLS's (cls serve --output). Placeholders hear it when they
	// register (RegisterReply.OutputFiles).
	Output string `json:"output,omitempty"`
}

// Output modes (SiteSpec.Output, cls serve --output).
const (
	OutputModeFiles   = "files"
	OutputModeStreams = "streams"
)

// SiteInfo is a site with what its provisioner knows now.
type SiteInfo struct {
	SiteSpec
	Queued    int `json:"queued"`    // placeholders waiting in the site's batch queue
	Running   int `json:"running"`   // placeholders running
	Exited    int `json:"exited"`    // placeholders seen to end since the CLS started
	Connected int `json:"connected"` // placeholders connected to the CLS now
	// QueueWaitS is the mean time a placeholder waited in the batch queue
	// before it started (recent ones); OldestQueuedS the longest wait of one
	// still queued.
	QueueWaitS    float64 `json:"queue_wait_s"`
	OldestQueuedS float64 `json:"oldest_queued_s"`
	// OldestWhy is why the oldest queued placeholder waits, as its batch
	// system says: Slurm's reason (JobHeldAdmin, PartitionTimeLimit...),
	// "held" (SGE h, PBS H) or PBS's comment; "" when it does not say.
	OldestWhy string `json:"oldest_why,omitempty"`
	State     string `json:"state"`           // starting, ok, throttled, degraded, removing
	Error     string `json:"error,omitempty"` // why degraded
	// NeedsLogin says the site, added with --openssh, is degraded until
	// the user logs in to it (cls site login NAME): its login host
	// refused every login that asks nothing.
	NeedsLogin bool `json:"needs_login,omitempty"`
	// Staging says why data staging leaves the site alone as a target
	// now: its data root had no room ("" when none of that).
	Staging  string `json:"staging,omitempty"`
	Platform string `json:"platform,omitempty"`
	// Given says where the placeholders connected now were given other
	// than what they asked for ("asked 16 cpus, given 8
	// (SLURM_CPUS_ON_NODE)"), each distinct note once; "" when none was.
	Given string `json:"given,omitempty"`
	// Offered is what the placeholders connected now offer their jobs
	// (Register.Capacity: "cpus=16 mem=64 GiB gpus=0,1"), each distinct
	// one once.
	Offered string `json:"offered,omitempty"`
	// Paused counts the placeholders connected now that take no new jobs
	// because their output disk is nearly full (Heartbeat.Paused).
	Paused int `json:"paused,omitempty"`
	// Broken lists the site's placeholders that said their node cannot
	// run jobs (Heartbeat.Broken) in the last BrokenKept, connected or
	// not (such a placeholder exits once its jobs end), the latest first,
	// MaxBroken at most. The CLS stores them: a restart keeps them.
	Broken []BrokenPlaceholder `json:"broken,omitempty"`
	// Unreachable says a remote site's last listing failed: the network
	// between it and the CLS may be cut. AnsweredAt is when it last
	// answered (zero: not since the CLS started).
	Unreachable bool      `json:"unreachable,omitempty"`
	AnsweredAt  time.Time `json:"answered_at,omitzero"`
	// HeldPlaceholders and HeldLeases count the site's silent
	// placeholders, and the attempts they run, whose lapsed leases the CLS
	// holds because the site may be cut off (cls serve --partition-grace):
	// their jobs stay Running. HeldUntil is when the last of those holds
	// runs out, unless the site is back first.
	HeldPlaceholders int       `json:"held_placeholders,omitempty"`
	HeldLeases       int       `json:"held_leases,omitempty"`
	HeldUntil        time.Time `json:"held_until,omitzero"`
}

// CutNote says what s says of a site that does not answer or whose
// leases are held, its times as clock writes them: "unreachable since
// 14:02:11, 3 placeholders' 7 jobs held until 14:32:11"; "" for a site
// that answers with none held.
func (s SiteInfo) CutNote(clock func(time.Time) string) string {
	var note string
	switch {
	case !s.Unreachable:
	case s.AnsweredAt.IsZero():
		note = "unreachable, no answer since the CLS started"
	default:
		note = "unreachable since " + clock(s.AnsweredAt)
	}
	if s.HeldLeases <= 0 {
		return note
	}
	if note != "" {
		note += ", "
	}
	whose := fmt.Sprintf("%d placeholders'", s.HeldPlaceholders)
	if s.HeldPlaceholders == 1 {
		whose = "1 placeholder's"
	}
	jobs := "jobs"
	if s.HeldLeases == 1 {
		jobs = "job"
	}
	return fmt.Sprintf("%s%s %d %s held until %s", note, whose, s.HeldLeases, jobs, clock(s.HeldUntil))
}

// BrokenPlaceholder is a placeholder that said its node cannot run jobs.
type BrokenPlaceholder struct {
	ID   int64     `json:"id"`
	Host string    `json:"host,omitempty"`
	Why  string    `json:"why"`
	At   time.Time `json:"at"` // when the CLS first heard it
}

// How long, and how many, broken placeholders a site lists
// (SiteInfo.Broken): the node stays broken after its placeholder exits
// and after the CLS restarts, until the site drains or mends it.
const (
	BrokenKept = 24 * time.Hour
	MaxBroken  = 8
)

// SiteList lists sites.
type SiteList struct {
	Sites []SiteInfo `json:"sites"`
}

// SiteSet changes a site's settings without removing it (cls site set);
// nil fields stay. Placeholders submitted from then on have the new
// slots, walltime and idle timeout; running ones keep theirs.
type SiteSet struct {
	Name      string   `json:"name"`
	Price     *float64 `json:"price,omitempty"`
	Slots     *int     `json:"slots,omitempty"`
	Min       *int     `json:"min,omitempty"`
	Max       *int     `json:"max,omitempty"`
	Provision *string  `json:"provision,omitempty"` // "" = the demand rule
	Walltime  *float64 `json:"walltime_s,omitempty"`
	Idle      *float64 `json:"idle_s,omitempty"`
	Mem       *int64   `json:"mem,omitempty"` // 0: not asked
	GPUs      *int     `json:"gpus,omitempty"`
	// Resources replaces the site's named amounts ("": none).
	Resources *string `json:"resources,omitempty"`
	// Output replaces the site's output mode ("": the CLS's), for
	// placeholders that register from then on.
	Output *string `json:"output,omitempty"`
	// Queue and SubmitArgs replace a remote site's batch queue (or
	// partition) and extra qsub/sbatch arguments ("": none), for
	// placeholders submitted from then on: a site the batch system
	// refuses (no such partition, an account required) is mended in place.
	Queue      *string `json:"queue,omitempty"`
	SubmitArgs *string `json:"submit_args,omitempty"`
	// CLSAddr replaces where a direct site's compute nodes dial the CLS
	// ("": the CLS's own address), for placeholders submitted from then on.
	CLSAddr *string `json:"cls_addr,omitempty"`
}

// SiteRemove names a site to remove.
type SiteRemove struct {
	Name string `json:"name"`
}
