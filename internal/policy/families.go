package policy

import (
	"context"
	"time"
)

// The policy families beyond "pick the next ready job", declared here so
// that the CLS, the simulator and the commands meet them through the one
// registry. Each is a pure function of what it is shown, like Ordering
// and DC, so mqsim runs the same code as the CLS. A family is a field of
// Info: a policy may be Ordered and also replicate (WQR is FCFS with
// end-game replication).

// Replicator chooses a running job to copy for an idle placeholder when no
// job is ready (WQR's and Storage Affinity's end game: the first copy to
// finish wins, the others are killed). It sees only jobs that may be
// replicated (a job can opt out), each with its copies running now.
type Replicator interface {
	// Replicate returns the job to copy at site, or ok false for none.
	Replicate(site string, running []Running) (id int64, ok bool)
}

// Running is a running job as a Replicator sees it.
type Running struct {
	ID       int64
	Replicas int // copies running now (1: the original alone)
	// LocalBytes is how many of its input bytes are already at the
	// asking placeholder's site (with NeedsFiles; 0 otherwise).
	LocalBytes int64
	Est        float32 // expected runtime in seconds; 0 = unknown
}

// Planner plans a target DAG ahead (HEFT, MinMin, AEH-ETAA): the site of
// each job and of each file. The CLS follows a plan when a placeholder at
// the planned site asks; when it cannot be followed, the queue's dynamic
// policy (Order) takes over and the deviation is recorded.
type Planner interface {
	Plan(ctx context.Context, p Problem) (Plan, error)
}

// Problem is what a Planner plans over.
type Problem struct {
	Jobs  []PlanJob
	Sites []PlanSite
	// Bandwidth returns bytes per second from one site to another (the
	// same site: +Inf); Latency their one-way latency in seconds.
	Bandwidth func(from, to string) float64
	Latency   func(from, to string) float64
	Seed      int64 // planners that search are deterministic per seed
}

// PlanJob is one job of a Problem.
type PlanJob struct {
	ID      int64
	Prereqs []int64            // jobs that must end before it starts
	Est     map[string]float64 // expected runtime per site, seconds
	Inputs  []PlanFile
	Outputs []PlanFile
	// Slots is how many of its site's slots the job holds at once: its
	// cores (0 is 1; more than a site has is all of that site's).
	Slots int
}

// PlanFile is a file a job reads or writes; At lists the sites that hold
// a replica now (inputs not made by another job of the Problem).
type PlanFile struct {
	Path string
	Size int64
	At   []string
}

// PlanSite is a site a Planner may place jobs at.
type PlanSite struct {
	Name  string
	Slots int // jobs it runs at once
}

// Plan is a Planner's answer.
type Plan struct {
	Site     map[int64]string  // job -> site
	Order    []int64           // the order to start jobs in at their sites
	FileSite map[string]string // output path -> site that keeps it
	Makespan float64           // predicted, seconds
	Moved    int64             // predicted bytes between sites
}

// Provisioner decides how many placeholders each site should hold
// (deadline-and-budget economics, LP-planned placement), re-planned as
// measured rates change. The site manager follows it within each site's
// min and max.
type Provisioner interface {
	Provision(now time.Time, d Demand) map[string]int
}

// Demand is what a Provisioner sees.
type Demand struct {
	Ready, Running int // jobs
	// Waiting counts jobs whose prerequisites have not ended: a later
	// stage of a pipeline (LP) is planned for the jobs it will get.
	Waiting int
	// Out is the mean bytes one job writes (measured from the files its
	// ended jobs reported; 0: unknown or none): what a stage sends the
	// next (LP).
	Out float64
	// FeedsNext: the next stage listed reads what this one writes (its
	// jobs name this one's targets); else Out crosses no link between
	// them (LP).
	FeedsNext bool
	Sites     []SiteView
	Deadline  time.Time // zero: none
	Budget    float64   // money left; 0: no budget (see Budgeted)
	// Budgeted: the budget is Budget even when 0 (all spent).
	Budgeted bool
	// Est is the expected seconds of a job where no rate is measured: a
	// site without a Rate is planned at Slots/Est (0: unknown).
	Est float64
}

// EconQueue is a queue as the site manager's provisioning sees it: one
// with a deadline or a budget (deadline-and-budget planning), or one stage
// of a pipeline (LP).
type EconQueue struct {
	Queue          string
	Ready, Running int       // jobs
	Deadline       time.Time // zero: none
	Budgeted       bool      // it has a budget (Budget may be 0: spent)
	Budget         float64   // left: less what ended and running attempts cost
	// Waiting, Out and FeedsNext: as Demand's.
	Waiting   int
	Out       float64
	FeedsNext bool
	// PerJob is the mean seconds a job of the queue took at each site it
	// succeeded at; Est the expected seconds of a job where none is
	// measured (0: unknown).
	PerJob map[string]float64
	Est    float64
	// Busy is how many of its jobs each site runs now.
	Busy map[string]int
}

// SiteView is one site as a Provisioner sees it.
type SiteView struct {
	Name            string
	Min, Max        int     // placeholders allowed
	Queued, Running int     // placeholders now
	Slots           int     // jobs per placeholder
	Price           float64 // per core-hour; 0: free
	Rate            float64 // measured jobs per second per placeholder; 0: unknown
	Busy            int     // the demand's jobs running there now
	// Link is the bytes per second of the site's link to the CLS (what
	// staging measured, else what the site was configured with): a file
	// made at one site and read at another crosses both sites' links. 0:
	// unbounded.
	Link float64
}
