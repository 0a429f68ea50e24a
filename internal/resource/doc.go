// Package resource describes what a job asks of a placeholder (cores,
// memory, GPUs, site-named amounts) and what a placeholder holds, and
// decides how jobs are packed into placeholders. It does no I/O: the
// CLS's dispatch and mqsim call the same functions, so the simulator
// models the fit rule the live system applies.
//
// # Requests
//
// Sizes are parsed as Slurm writes them: ParseMem("8G"), "500M",
// "1.5G", a bare number in MiB; ParseCPUs and ParseGPUs take positive
// integers; ParseNamed takes "NAME=N". Every error is one line naming
// the value. "auto" for cores or memory (Request.SetCPUs, SetMem) asks
// for the size to be learned.
//
// # The fit rule
//
// A Pool is what one placeholder has free. A request fits when each of
// its amounts is at most what is free: cores, memory (when the
// placeholder knows its memory; otherwise memory is not counted),
// GPUs, each named resource. Take takes the lowest free core positions
// and GPUs, so grants are deterministic and a job's GPUs are its own;
// Give returns them. A request for no cores takes one, and a
// placeholder that declares only its core count is today's placeholder
// of that many slots: a 1-core request is one slot. The policy's order
// is kept: a placeholder with free capacity takes the first job, in
// that order, that fits it.
//
// # Starvation
//
// A big job that fits a placeholder's shape (Capacity.Holds) but keeps
// losing to a stream of small ones is reserved for: once it has waited
// a bound (Starving), the placeholder takes only jobs that leave big's
// whole need free (Admits), the jobs running drain, and big starts.
// Its wait is then at most the bound plus the longest running job's
// remaining time, as with Slurm's backfill when no small job is known to
// end in time.
//
// # Learned sizes
//
// A Learner keeps, per category (queue and target), a bounded uniform
// sample of finished jobs' max RSS and CPU time over elapsed. After
// MinJobs (5) have finished, Suggest gives the 95th percentile of max
// RSS plus 20 %, rounded up to 64 MiB, and the 95th percentile of cores
// used, rounded up; before that, the declared maximum or the whole
// placeholder. MemRetry is the rule for a job killed for its memory:
// once at twice its request up to the maximum, and a learned (auto) size
// once more at the maximum, not counted as attempts.
package resource
