package protocol

// Plans (cls plan): a planner (HEFT, MinMin, AEH-ETAA) places a target's
// jobs, and those of the targets it needs, on sites ahead; the CLS follows
// the plan where it can and binds late where it cannot (DESIGN.md,
// "Plans").
var (
	OpPlanMake = op[PlanMake, PlanSummary](Spec{Name: "plan.make", Role: RoleUser, Durable: true,
		Doc: "plans a target's DAG over the sites with a planner and follows the plan"})
	OpPlanShow = op[PlanShow, PlanShowReply](Spec{Name: "plan.show", Role: RoleUser,
		Doc: "lists the plans in force: jobs per planner and site, followed or not, and each plan's predicted per-site timeline"})
	OpPlanClear = op[Empty, PlanClearReply](Spec{Name: "plan.clear", Role: RoleUser, Durable: true,
		Doc: "forgets every plan: jobs bind late again"})
)

// PlanMake asks for a plan of Target's DAG.
type PlanMake struct {
	Target  string `json:"target"`
	Planner string `json:"planner"`
	// TimeLimitS bounds a search (AEH-ETAA); 0 = the planner's default.
	TimeLimitS float64 `json:"time_limit_s,omitempty"`
	// EstS is the runtime assumed for a job that declares none and whose
	// command class has no runs in the accounting; 0 = 60 s.
	EstS float64 `json:"est_s,omitempty"`
	// SiteSpeed gives sites' relative speeds (a runtime at speed 1 over
	// the speed); sites not named get theirs from the accounting, else 1.
	SiteSpeed map[string]float64 `json:"site_speed,omitempty"`
	// NoLearn ignores the accounting: declared estimates (or EstS) over
	// the sites' given speeds.
	NoLearn bool `json:"no_learn,omitempty"`
}

// MaxSiteSpeeds bounds PlanMake.SiteSpeed.
const MaxSiteSpeeds = 1024

// PlanSummary is a plan as made: what it predicts, and jobs per site.
type PlanSummary struct {
	Target     string     `json:"target"`
	Planner    string     `json:"planner"`
	Jobs       int        `json:"jobs"`
	MakespanS  float64    `json:"makespan_s"`  // predicted
	MovedBytes int64      `json:"moved_bytes"` // predicted, between sites
	Sites      []PlanSite `json:"sites"`
	PlanningS  float64    `json:"planning_s"` // how long planning took
	// Estimates counts the planned jobs by where their runtimes came
	// from, at the site they were planned at: "site" (their command
	// class's runs there), "class" (its runs elsewhere, scaled by the
	// sites' speeds), "declared" (mqsub -e), "default" (EstS).
	Estimates map[string]int `json:"estimates,omitempty"`
}

// PlanSite counts a plan's jobs at one site; the counts past Jobs say how
// the plan has been followed so far.
type PlanSite struct {
	Planner string `json:"planner,omitempty"`
	Site    string `json:"site"`
	Jobs    int    `json:"jobs"`
	// Speed is the site's speed the plan assumed (plan.make only).
	Speed   float64 `json:"speed,omitempty"`
	Ended   int     `json:"ended,omitempty"`
	RanHere int     `json:"ran_here,omitempty"` // jobs whose last attempt ran at the planned site
	RanElse int     `json:"ran_elsewhere,omitempty"`
}

// PlanShow asks for the plans in force. Limit bounds the jobs listed per
// site of each plan's timeline: 0 = DefaultPlanShowLimit, at most
// MaxPlanShowLimit.
type PlanShow struct {
	Limit int `json:"limit,omitempty"`
}

// Bounds of PlanShow.Limit, and of a reply: the newest MaxPlansShown
// plans, and timelines cut (each site's More counting the rest) where the
// reply would pass PlanShowBytes, well under MaxFrame.
const (
	DefaultPlanShowLimit = 20
	MaxPlanShowLimit     = 100_000
	MaxPlansShown        = 20
	PlanShowBytes        = 2 << 20
)

// PlanShowReply lists the plans in force: Sites counts jobs per planner
// and site over every plan, Plans gives each plan (oldest first) with its
// predicted timeline per site.
type PlanShowReply struct {
	Sites []PlanSite  `json:"sites"`
	Plans []PlanShown `json:"plans,omitempty"`
	// Untimed counts the planned jobs of plans made before timelines were
	// stored (before schema version 17): counted in Sites, in no plan of
	// Plans.
	Untimed int `json:"untimed,omitempty"`
	// Older counts the plans in force older than those listed.
	Older int `json:"older,omitempty"`
	// Provision is the last plan of each provisioning policy sites follow
	// (cls site add --provision): placeholders per site, and per queue
	// the jobs each site may run at once.
	Provision []ProvisionShown `json:"provision,omitempty"`
}

// ProvisionShown is a provisioning policy's last plan.
type ProvisionShown struct {
	Policy string `json:"policy"`
	Made   string `json:"made"` // RFC 3339
	// Rate is the pipeline's predicted rate, in jobs of its first stage
	// per second (lp; 0: not predicted).
	Rate         float64          `json:"rate,omitempty"`
	Placeholders map[string]int   `json:"placeholders"` // per site
	Queues       []ProvisionQueue `json:"queues"`       // lp: in stage order
	// More counts the queues planned beyond the MaxProvisionQueuesShown
	// listed.
	More int `json:"more,omitempty"`
}

// MaxProvisionQueuesShown bounds the queues a ProvisionShown lists.
const MaxProvisionQueuesShown = 200

// ProvisionQueue is one queue's part of a provisioning plan.
type ProvisionQueue struct {
	Queue   string `json:"queue"`
	Ready   int    `json:"ready"`
	Waiting int    `json:"waiting"`
	Running int    `json:"running"`
	// OutBytes is the mean bytes its ended jobs wrote (what a stage sends
	// the next; 0: unknown).
	OutBytes int64          `json:"out_bytes,omitempty"`
	Slots    map[string]int `json:"slots"` // jobs each site may run at once
	// Unfinishable counts ready jobs no plan ends within the queue's
	// deadline and budget.
	Unfinishable int `json:"unfinishable,omitempty"`
}

// PlanShown is one plan in force: what it predicted when made, and per
// site its jobs in predicted start order.
type PlanShown struct {
	ID         int64              `json:"id"`
	Target     string             `json:"target"`
	Planner    string             `json:"planner"`
	Made       string             `json:"made"` // RFC 3339
	MakespanS  float64            `json:"makespan_s"`
	MovedBytes int64              `json:"moved_bytes"`
	Jobs       int                `json:"jobs"` // planned by it still (a later plan may take jobs over)
	Sites      []PlanSiteTimeline `json:"sites"`
}

// PlanSiteTimeline is one site's part of a plan.
type PlanSiteTimeline struct {
	Site    string  `json:"site"`
	Slots   int     `json:"slots"` // the plan assumed
	Jobs    int     `json:"jobs"`
	BusyS   float64 `json:"busy_s"`      // slot-seconds its jobs are predicted to take
	Util    float64 `json:"utilisation"` // BusyS over slots x the makespan
	Ended   int     `json:"ended"`
	RanHere int     `json:"ran_here"`
	RanElse int     `json:"ran_elsewhere"`
	// Timeline lists the first jobs by predicted start; More counts the
	// rest.
	Timeline []PlanSlot `json:"timeline"`
	More     int        `json:"more,omitempty"`
}

// PlanSlot is one job of a plan's timeline.
type PlanSlot struct {
	ID     int64   `json:"id"`
	Target string  `json:"target"`
	Slot   int     `json:"slot"`
	StartS float64 `json:"start_s"` // predicted, from the plan's start
	EndS   float64 `json:"end_s"`
	State  string  `json:"state"`
	RanAt  string  `json:"ran_at,omitempty"` // the site of its latest attempt's placeholder
}

// PlanClearReply says how many jobs' plans were dropped.
type PlanClearReply struct {
	Cleared int `json:"cleared"`
}
