package policy

import (
	"fmt"
	"strings"

	"github.com/mq-hpc/mq/internal/dbc"
)

// Kind is what a policy decides when a placeholder asks for work.
type Kind int

const (
	// Ordered policies hand out the head of a queue's ready jobs, kept in
	// a heap by Info.Order: O(log n) a pick, whatever the backlog.
	Ordered Kind = iota + 1
	// Choosing policies look at the oldest ready jobs (Info.Order, at most
	// DC.MaxExamined) with what the asking placeholder's site holds, the
	// other placeholders' predicted arrivals and the links between sites,
	// and pick one or tell the placeholder to wait (DC).
	Choosing
	// Provisioning policies decide how many placeholders each site holds
	// (Info.NewProvisioner); a site manager follows one, a queue cannot.
	Provisioning
)

// A queue's policy may also replicate running jobs (Info.NewReplicator)
// or follow a plan made ahead over the target DAG (Info.NewPlanner):
// families.go declares those interfaces.

// Needs lists what a policy needs the CLS (or the simulator) to keep for it.
type Needs uint

const (
	// NeedsEstimates: runtimes of jobs that declare none, learned per
	// target from finished jobs (Expect).
	NeedsEstimates Needs = 1 << iota
	// NeedsFiles: where each declared file is and what moving it costs.
	NeedsFiles
	// NeedsArrivals: when each placeholder is predicted to ask next.
	NeedsArrivals
	// NeedsBLevels: each ready job's b-level in Ready.Prio (CP), from the
	// job DAG and declared or learned runtimes.
	NeedsBLevels
	// NeedsBytesHere: of each candidate's inputs only the bytes already at
	// the asking site, every replica counted, not what moving the rest
	// would cost (Storage Affinity).
	NeedsBytesHere
)

// Info describes one policy: the single place a policy is named. The CLS,
// the simulator and every command find policies here.
type Info struct {
	Name    string
	Summary string // one line, for help texts
	Kind    Kind
	Needs   Needs
	// Order keeps a queue's ready jobs: the pick of an Ordered policy, the
	// examination order of a Choosing one.
	Order Ordering
	// NewDC returns the decision rule of a Choosing policy for a network
	// whose one-way placeholder latency is latency seconds.
	NewDC func(latency float64) DC
	// NewChooser is the decision rule of a Choosing policy that is not DC
	// (Storage Affinity, XSufferage).
	NewChooser func() Chooser
	// NewReplicator, if set, makes the queue copy running jobs for idle
	// placeholders when nothing is ready.
	NewReplicator func() Replicator
	// NewPlanner, if set, plans the queue's DAG ahead; Order takes over
	// where the plan cannot be followed.
	NewPlanner func() Planner
	// NewProvisioner is a Provisioning policy's planner.
	NewProvisioner func() Provisioner
	// SimOnly policies run in mqsim but not yet in a live queue.
	SimOnly bool
	// ComparedWith names the policy a results table sets this one
	// against, as its seed's tables do; "" compares it with none.
	ComparedWith string
}

// An Unbounder is a Chooser whose live form examines only the oldest ready
// jobs, to keep a decision fast; the simulator examines all of them, as
// the seeds do.
type Unbounder interface {
	Unbounded() Chooser
}

// A ReplicaLimiter is a Replicator whose copies of one running job can be
// bounded (mqsim grid --max-copies); n counts the original, 0 is unbounded.
type ReplicaLimiter interface {
	LimitReplicas(n int) Replicator
}

// baseline is the policy the others are measured against.
const baseline = "fcfs"

// Baseline returns the policy the others are measured against: the one a
// queue falls back to and the column a comparison is relative to.
func Baseline() Info {
	p, err := Lookup(baseline)
	if err != nil {
		panic(err)
	}
	return p
}

// ForQueues reports whether a queue may use the policy (cls queue set
// --policy); a provisioning policy is for sites.
func (p Info) ForQueues() bool { return (p.Kind == Ordered || p.Kind == Choosing) && !p.SimOnly }

// check reports what is missing from a registry entry for its kind.
func (p Info) check() error {
	switch {
	case p.Name == "" || p.Summary == "":
		return fmt.Errorf("policy %q: a name and a summary are needed", p.Name)
	case p.ForQueues() && p.Order == nil:
		return fmt.Errorf("policy %s: a queue policy needs an Order", p.Name)
	case p.Kind == Choosing && (p.NewDC == nil) == (p.NewChooser == nil):
		return fmt.Errorf("policy %s: a choosing policy needs one of NewDC and NewChooser", p.Name)
	case p.Kind == Provisioning && (p.NewProvisioner == nil || p.Order != nil || p.NewReplicator != nil || p.NewPlanner != nil):
		return fmt.Errorf("policy %s: a provisioning policy has NewProvisioner and nothing of a queue's", p.Name)
	case p.Kind != Ordered && p.Kind != Choosing && p.Kind != Provisioning:
		return fmt.Errorf("policy %s: unknown kind %d", p.Name, p.Kind)
	}
	return nil
}

// registry is every policy, in the order help texts list them.
var registry = []Info{
	{Name: "fcfs", Summary: "first come, first served: the oldest ready job", Kind: Ordered, Order: FCFS{}},
	{Name: "sjf", Summary: "shortest job first, by declared or learned runtime", Kind: Ordered, Needs: NeedsEstimates, Order: SJF{}},
	{Name: "cp", Summary: "critical path first: the ready job with the longest remaining chain of work behind it (b-level), by declared or learned runtimes",
		Kind: Ordered, Needs: NeedsEstimates | NeedsBLevels, Order: CP{}},
	{Name: "dc", Summary: "data-conscious, thesis 004: run jobs where their input files are", Kind: Choosing,
		Needs: NeedsEstimates | NeedsFiles | NeedsArrivals, Order: dcOrder{}, NewDC: DefaultDC},
	{Name: "sa", Summary: "storage affinity, seed 000: the job with the most input bytes at the placeholder's site; copies of running jobs for idle placeholders",
		Kind: Choosing, Needs: NeedsFiles | NeedsBytesHere, Order: namedFCFS("sa"),
		NewChooser:    func() Chooser { return StorageAffinity{MaxExamined: DefaultMaxExamined} },
		NewReplicator: func() Replicator { return StorageAffinity{} },
		ComparedWith:  "xsufferage"},
	{Name: "wqr", Summary: "workqueue with replication, seed 000: fcfs, then copies of running jobs for idle placeholders",
		Kind: Ordered, Order: namedFCFS("wqr"),
		NewReplicator: func() Replicator { return WQR{} }},
	{Name: "xsufferage", Summary: "site-level sufferage, seed 000: the job that would suffer most at another site, by measured runtimes and transfer rates",
		Kind: Choosing, Needs: NeedsEstimates | NeedsFiles | NeedsArrivals, Order: namedFCFS("xsufferage"),
		NewChooser: func() Chooser { return XSufferage{MaxExamined: DefaultXSufferageExamined} }},
	{Name: "dbc-cost", Summary: "deadline and budget, seed 002: the cheapest sites' placeholders, dearer ones only as the deadline needs (cost optimisation)",
		Kind: Provisioning, NewProvisioner: func() Provisioner { return DBC{Strategy: dbc.Cost} }},
	{Name: "dbc-costtime", Summary: "deadline and budget, seed 002: as dbc-cost, spreading jobs over sites of equal cost to end earlier (cost-time optimisation)",
		Kind: Provisioning, NewProvisioner: func() Provisioner { return DBC{Strategy: dbc.CostTime} }},
	{Name: "dbc-time", Summary: "deadline and budget, seed 002: the sites that end each job soonest within the budget (time optimisation)",
		Kind: Provisioning, NewProvisioner: func() Provisioner { return DBC{Strategy: dbc.Time} }},
	{Name: "lp", Summary: "LP-planned placement, seed 001: the planned queues as stages of a pipeline, job slots per stage per site from measured runtimes (LPSched)",
		Kind: Provisioning, NewProvisioner: func() Provisioner { return LP{} }},
}

// How many of the oldest ready jobs a live SA or XSufferage decision looks
// at, so that a decision stays under a millisecond whatever the backlog
// (BenchmarkSADecision100k, BenchmarkXSufferageDecision100k); the
// simulator looks at all of them, as the seed does. XSufferage prices
// every job at every site, so it looks at fewer.
const (
	DefaultMaxExamined        = 4096
	DefaultXSufferageExamined = 256
)

// namedFCFS keeps ready jobs oldest first under a policy's own name.
type namedFCFS string

func (n namedFCFS) Name() string       { return string(n) }
func (namedFCFS) Less(a, b Ready) bool { return FCFS{}.Less(a, b) }
func (namedFCFS) byArrival()           {}

// dcOrder keeps a dc queue's ready jobs oldest first, the order DC
// examines them in, under DC's own name.
type dcOrder struct{ FCFS }

func (dcOrder) Name() string { return "dc" }

// Lookup returns the named policy.
func Lookup(name string) (Info, error) {
	for _, p := range registry {
		if p.Name == name {
			return p, nil
		}
	}
	return Info{}, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Stored returns the policy a stored queue names: a name this build does
// not know (a newer version's) falls back to the Baseline.
func Stored(name string) Info {
	if p, err := Lookup(name); err == nil {
		return p
	}
	return Baseline()
}

// All returns every policy, in help order.
func All() []Info { return append([]Info(nil), registry...) }

// Names lists the policies' names, in help order.
func Names() []string {
	n := make([]string, len(registry))
	for i, p := range registry {
		n[i] = p.Name
	}
	return n
}
