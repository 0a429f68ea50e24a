package policy

import (
	"fmt"
	"strings"
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
)

// The families the next issues add get kinds of their own beside these,
// each with its interface declared here: replicating policies (WQR,
// Storage Affinity: also hand an idle placeholder a copy of a running
// job), planning policies (HEFT, MinMin, AEH-ETAA: a plan made ahead over
// the target DAG, followed while it holds), and provisioning planners (how
// many placeholders each site holds, from prices, deadlines and rates).

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
}

// registry is every policy, in the order help texts list them.
var registry = []Info{
	{Name: "fcfs", Summary: "first come, first served: the oldest ready job", Kind: Ordered, Order: FCFS{}},
	{Name: "sjf", Summary: "shortest job first, by declared or learned runtime", Kind: Ordered, Needs: NeedsEstimates, Order: SJF{}},
	{Name: "dc", Summary: "data-conscious, thesis 004: run jobs where their input files are", Kind: Choosing,
		Needs: NeedsEstimates | NeedsFiles | NeedsArrivals, Order: dcOrder{}, NewDC: DefaultDC},
}

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
