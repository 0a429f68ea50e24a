package plan

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/wfformat"
)

// Platform is a set of sites for FromWorkflow: their names, slots and
// speeds (a task's traced runtime divided by its site's speed), one
// bandwidth and latency between any two, and the site that holds the
// workflow's own inputs (files no task writes).
type Platform struct {
	Sites     []policy.PlanSite
	Speed     map[string]float64
	Bandwidth float64 // bytes per second between two sites
	Latency   float64 // seconds
	Home      string
}

// GenPlatform is n sites of slots slots each with speeds drawn from
// U(0.5, 1.5) by seed (the first site, the inputs' home, at 1), linked by
// bw bytes/s with latency lat.
func GenPlatform(n, slots int, bw, lat float64, seed uint64) Platform {
	r := rand.New(rand.NewPCG(seed, 0x003))
	p := Platform{Speed: map[string]float64{}, Bandwidth: bw, Latency: lat}
	for i := range n {
		name := fmt.Sprintf("site%d", i+1)
		p.Sites = append(p.Sites, policy.PlanSite{Name: name, Slots: slots})
		p.Speed[name] = 0.5 + r.Float64()
		if i == 0 {
			p.Speed[name] = 1
			p.Home = name
		}
	}
	return p
}

// FromWorkflow is the planning Problem of a WfFormat trace on pl: each
// task a job (ids 1..n in the trace's order), its runtime at a site the
// traced one over the site's speed, holding the task's cores, its files
// with the trace's sizes.
func FromWorkflow(w *wfformat.Workflow, pl Platform) (policy.Problem, error) {
	if len(pl.Sites) == 0 {
		return policy.Problem{}, ErrNoSites
	}
	if !(pl.Bandwidth > 0) || pl.Latency < 0 || math.IsNaN(pl.Latency) {
		return policy.Problem{}, fmt.Errorf("plan: bandwidth %g, latency %g", pl.Bandwidth, pl.Latency)
	}
	home := pl.Home
	if home == "" {
		home = pl.Sites[0].Name
	}
	p := policy.Problem{
		Sites:     pl.Sites,
		Bandwidth: func(_, _ string) float64 { return pl.Bandwidth },
		Latency:   func(_, _ string) float64 { return pl.Latency },
		Seed:      1,
	}
	written := map[string]bool{}
	for _, t := range w.Tasks {
		for _, o := range t.Outputs {
			written[o] = true
		}
	}
	idOf := make(map[string]int64, len(w.Tasks))
	for i, t := range w.Tasks {
		idOf[t.ID] = int64(i + 1)
	}
	claimed := map[string]bool{}
	for i, t := range w.Tasks {
		if t.Cores > resource.MaxCPUs {
			// As the live replay (mqsub --wfformat) and mqsim --trace refuse it.
			return policy.Problem{}, fmt.Errorf("plan: task %q asks for %d cores, more than %d", t.ID, t.Cores, resource.MaxCPUs)
		}
		// Its cores held at once, as the live plan's jobs (plans.problem).
		j := policy.PlanJob{ID: int64(i + 1), Est: map[string]float64{}, Slots: max(t.Cores, 1)}
		for _, s := range pl.Sites {
			sp := pl.Speed[s.Name]
			if !(sp > 0) {
				sp = 1
			}
			j.Est[s.Name] = max(t.Runtime, 0) / sp
		}
		for _, par := range t.Parents {
			if id, ok := idOf[par]; ok {
				j.Prereqs = append(j.Prereqs, id)
			}
		}
		for _, in := range t.Inputs {
			f := policy.PlanFile{Path: in, Size: w.FileSizes[in]}
			if !written[in] {
				f.At = []string{home}
			}
			j.Inputs = append(j.Inputs, f)
		}
		for _, o := range t.Outputs {
			if claimed[o] {
				continue // a trace naming one file as two tasks' output: the first writes it
			}
			claimed[o] = true
			j.Outputs = append(j.Outputs, policy.PlanFile{Path: o, Size: w.FileSizes[o]})
		}
		p.Jobs = append(p.Jobs, j)
	}
	return p, nil
}

// EC2Platform is the seed's platform for Tables 6.4/6.5 as the seed
// models it (Algorithm 8: a VM runs one task at a time, a task's runtime
// is its base time times the VM's slowdown): four EC2 VMs of one CPU type
// (m3.medium, m3.large, m3.xlarge, m3.2xlarge: 1, 2, 4 and 8 vCPUs) as
// four one-slot sites of speeds 1, 2, 4 and 8, linked by bw bytes/s with
// latency lat; m3.medium holds the workflow's inputs.
func EC2Platform(bw, lat float64) Platform {
	p := Platform{Speed: map[string]float64{}, Bandwidth: bw, Latency: lat, Home: "m3.medium"}
	for i, name := range []string{"m3.medium", "m3.large", "m3.xlarge", "m3.2xlarge"} {
		p.Sites = append(p.Sites, policy.PlanSite{Name: name, Slots: 1})
		p.Speed[name] = float64(int(1) << i)
	}
	return p
}
