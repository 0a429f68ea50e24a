package dc

import (
	"context"
	"database/sql"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// What the core tells the module when an event happens, each one call;
// what it means for the catalog, plans, ledger and copies comes back as
// facts the core applies.

// Observe feeds a request for work by placeholder ph to the arrival
// predictor, when a queue chooses; its place is read (db) if it
// registered before this run.
func (d *State) Observe(ctx context.Context, db Querier, ph int64, now time.Time) error {
	if !d.Choosing() {
		return nil
	}
	at, err := d.PlaceholderAt(ctx, db, ph)
	if err != nil {
		return err
	}
	d.Asked(ph, at, now)
	return nil
}

// Busy is what the module asks the core about the placeholders at work.
type Busy interface {
	// Parked appends to dst the placeholders parked asking now.
	Parked(dst []int64) []int64
	// Running appends to dst the placeholders running a job.
	Running(dst []int64) []int64
}

// ForgetSilent drops from the arrival predictions the placeholders
// Silent finds, those busy (parked asking now or running a job) alive,
// and says whether it dropped any (a decision may differ).
func (d *State) ForgetSilent(now time.Time, lease time.Duration, busy Busy) bool {
	alive := func() map[int64]bool {
		phs := busy.Running(busy.Parked(nil))
		m := make(map[int64]bool, len(phs))
		for _, ph := range phs {
			m[ph] = true
		}
		return m
	}
	forgot := false
	for _, ph := range d.Silent(now, lease, alive) {
		forgot = d.Forget(ph) || forgot
	}
	return forgot
}

// Execer runs the core's prepared statement inside its open transaction
// (a *sql.Stmt on the writer).
type Execer interface {
	Exec(args ...any) (sql.Result, error)
}

// Submitted records a new job's declared files: one row each through
// ins (job_files: job, kind "i" or "o", seq, path, size, rel), and in
// memory. It returns them (nil: none declared) and the inputs the user's
// host has now (a size and a modification time), for the catalog.
func (d *State) Submitted(id int64, js *protocol.JobSpec, ins Execer) (jf *Files, onHost []protocol.File, err error) {
	if len(js.Inputs) == 0 && len(js.Outputs) == 0 {
		return nil, nil, nil
	}
	for _, k := range []struct {
		kind  string
		files []protocol.File
	}{{"i", js.Inputs}, {"o", js.Outputs}} {
		for i, f := range k.files {
			var size any
			if f.Size != nil {
				size = *f.Size
			}
			if _, err := ins.Exec(id, k.kind, i, f.Path, size, f.Rel); err != nil {
				return nil, nil, err
			}
			if k.kind == "i" && f.MTime != 0 && f.Size != nil && *f.Size >= 0 {
				onHost = append(onHost, f)
			}
		}
	}
	jf = Declared(js)
	d.AddJob(id, jf)
	return jf, onHost, nil
}

// Made is what a Done job's outputs mean beyond DC: where they were made
// (Place), each as the catalog records it, what the job wrote, and the
// declared outputs whose places moved (nil: it declared none).
type Made struct {
	Place   Place
	Outputs []Output
	Wrote   float64 // bytes, of the outputs whose size is known
	Known   bool    // any size was known
	Moved   []File
}

// CatalogSize is the size the catalog may check a dependent's input against:
// the agent's, with a checksum; a declared size alone is a hint for DC,
// not a fact (-1).
func (o Output) CatalogSize() int64 {
	if o.SHA == "" {
		return -1
	}
	return o.Size
}

// Ended is how a job's attempt ended Done, for Done.
type Ended struct {
	ID                int64
	Target            string
	Placeholder       int64
	Started, Finished time.Time
	Outputs           []protocol.FileSum // as the agent reported them
	// Reported: the agent reports outputs (staging, or it said some).
	Reported bool
}

// Done learns a Done job's runtime and locates its outputs at its
// placeholder's place (read with db if unknown); the catalog says which
// checksums are well formed.
func (d *State) Done(ctx context.Context, db Querier, e Ended, cat Catalog) (Made, error) {
	d.Ran(e.Target, e.Started, e.Finished)
	jf := d.files[e.ID]
	if jf == nil || len(jf.Out) == 0 {
		return Made{}, nil
	}
	at, err := d.PlaceholderAt(ctx, db, e.Placeholder)
	if err != nil {
		return Made{}, err
	}
	m := Made{Place: d.SiteAt(at), Moved: jf.Out}
	m.Outputs = d.Outputs(e.ID, e.Outputs, e.Reported, d.IsShared(m.Place.Site), cat.ValidSHA)
	for _, o := range m.Outputs {
		if o.Size >= 0 {
			m.Wrote += float64(o.Size)
			m.Known = true
		}
		d.Locate(o.Path, Loc{At: at, Size: o.Size, Job: e.ID})
	}
	return m, nil
}

// Chooses says whether a queue of policy pol chooses its jobs for each
// asking placeholder (DC, SA, XSufferage), which is this module's work.
func Chooses(pol policy.Info) bool { return pol.Kind == policy.Choosing }

// LearnsEstimates says whether a queue of policy pol orders jobs that
// declared no runtime by a learned one (SJF); DC prices runtimes on its
// own.
func LearnsEstimates(pol policy.Info) bool {
	return pol.Kind == policy.Ordered && pol.Needs&policy.NeedsEstimates != 0
}

// CountQueues records the policies of the queues there are (Count).
func (d *State) CountQueues(pols []policy.Info) {
	n, sjf := 0, 0
	for _, p := range pols {
		if Chooses(p) {
			n++
		}
		if LearnsEstimates(p) {
			sjf++
		}
	}
	d.Count(n, sjf)
}
