package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
)

// Info names one planner: the single place the commands find them.
type Info struct {
	Name    string
	Summary string
	// New returns the planner; limit bounds a search (0: its default).
	New func(limit time.Duration) policy.Planner
	// StandIn orders the planners whose plan mqsim plan shows for one
	// that failed (1 first; 0: never stands in). HEFT first: it always
	// plans, fast, for sites alike or not.
	StandIn int
	// OnlyStandsIn: mqsim plan shows no column of the planner's own (the
	// list search pools the sites' slots as one).
	OnlyStandsIn bool
}

var planners = []Info{
	{Name: "heft", Summary: "HEFT: jobs by upward rank, each where it ends first; files stay where written",
		New: func(time.Duration) policy.Planner { return HEFT{} }, StandIn: 1},
	{Name: "minmin", Summary: "MinMin: the ready job that can end first, where it ends first; files stay where written",
		New: func(time.Duration) policy.Planner { return MinMin{} }, StandIn: 2},
	{Name: "aeh-etaa", Summary: "AEH-ETAA (seed 003): evolutionary search over job sites, file sites and order",
		New: func(limit time.Duration) policy.Planner { return AEHETAA{TimeLimit: limit} }},
	{Name: "list", Summary: "a search over priority lists for the sites' slots pooled as one (one site, or sites alike): forward-backward passes and late-acceptance hill climbing from cp's list",
		New: func(limit time.Duration) policy.Planner { return ListSearch{TimeLimit: limit} }, StandIn: 3, OnlyStandsIn: true},
	{Name: "lp", Summary: "LPSched (seed 001): the DAG's depths as pipeline stages, each site's slots per stage by linear programming",
		New: func(limit time.Duration) policy.Planner { return LP{TimeLimit: limit} }},
}

// Default is the planner used when none is named: HEFT, the first, which
// always plans, fast.
func Default() Info { return planners[0] }

// Names lists the planners' names in a fixed order.
func Names() []string {
	names := make([]string, len(planners))
	for i, p := range planners {
		names[i] = p.Name
	}
	return names
}

// Planners lists the planners in a fixed order.
func Planners() []Info { return append([]Info(nil), planners...) }

// Lookup finds a planner by name.
func Lookup(name string) (Info, error) {
	for _, p := range planners {
		if p.Name == name {
			return p, nil
		}
	}
	return Info{}, fmt.Errorf("unknown planner %q (have %s)", name, strings.Join(Names(), ", "))
}
