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
}

var planners = []Info{
	{Name: "heft", Summary: "HEFT: jobs by upward rank, each where it ends first; files stay where written",
		New: func(time.Duration) policy.Planner { return HEFT{} }},
	{Name: "minmin", Summary: "MinMin: the ready job that can end first, where it ends first; files stay where written",
		New: func(time.Duration) policy.Planner { return MinMin{} }},
	{Name: "aeh-etaa", Summary: "AEH-ETAA (seed 003): evolutionary search over job sites, file sites and order",
		New: func(limit time.Duration) policy.Planner { return AEHETAA{TimeLimit: limit} }},
	{Name: "list", Summary: "a search over priority lists for the sites' slots pooled as one (one site, or sites alike): forward-backward passes and late-acceptance hill climbing from cp's list",
		New: func(limit time.Duration) policy.Planner { return ListSearch{TimeLimit: limit} }},
	{Name: "lp", Summary: "LPSched (seed 001): the DAG's depths as pipeline stages, each site's slots per stage by linear programming",
		New: func(limit time.Duration) policy.Planner { return LP{TimeLimit: limit} }},
}

// Planners lists the planners in a fixed order.
func Planners() []Info { return append([]Info(nil), planners...) }

// Lookup finds a planner by name.
func Lookup(name string) (Info, error) {
	var names []string
	for _, p := range planners {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Info{}, fmt.Errorf("unknown planner %q (have %s)", name, strings.Join(names, ", "))
}
