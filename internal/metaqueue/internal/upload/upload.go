// Package upload keeps a bulk submission (mqsub -f, --array) as it
// arrives: each chunk's specs checked and spooled to a file, so that the
// metaqueue's core is not held while a client uploads. The core's commit
// then reads the spooled specs back (internal/metaqueue, Bulk.Commit).
//
// It is no module (it keeps nothing of the core's): it composes the
// modules' checks of an upload (specs, spool, arrays, sharedenv), which
// the modules, kept apart, may not do themselves.
package upload

import (
	"github.com/mq-hpc/mq/internal/metaqueue/arrays"
	"github.com/mq-hpc/mq/internal/metaqueue/sharedenv"
	"github.com/mq-hpc/mq/internal/metaqueue/specs"
	"github.com/mq-hpc/mq/internal/metaqueue/spool"
	"github.com/mq-hpc/mq/protocol"
)

// Defaults of the bounds New takes: the largest job array (mqsub
// --array) and room for it with long commands.
const (
	DefaultMaxJobs  = 10_000_000
	DefaultMaxBytes = 4 << 30
)

// Upload is a bulk submission on its way in. The commit takes its fields.
type Upload struct {
	Spool *spool.File
	N     int         // jobs spooled
	Specs *specs.Bulk // their edges and free jobs; nil once the commit took them
	// A job array (Array): its --array text and cap.
	IsArray    bool
	ArraySpec  string
	ArrayLimit int
	// Env is the environment every job shares, JSON (SharedEnv); "": none.
	Env string
}

// New starts an upload spooled in dir, of at most maxJobs jobs and
// maxBytes bytes.
func New(dir string, maxJobs int, maxBytes int64) (*Upload, error) {
	sp, err := spool.Create(dir, maxJobs, maxBytes)
	if err != nil {
		return nil, err
	}
	return &Upload{Spool: sp, Specs: specs.NewBulk()}, nil
}

// Len is the number of jobs spooled so far.
func (u *Upload) Len() int { return u.N }

// Add validates and spools jobs; line is the input line of jobs[0].
func (u *Upload) Add(line int, jobs []protocol.JobSpec) error { return u.add(line, jobs, true) }

// AddChecked spools jobs that already passed protocol.ValidateSpec (as
// protocol.ReadJobLines returns them): checking them again was 3 % of a
// 10,000,000-job mqsub -f.
func (u *Upload) AddChecked(line int, jobs []protocol.JobSpec) error {
	return u.add(line, jobs, false)
}

func (u *Upload) add(line int, jobs []protocol.JobSpec, validate bool) error {
	if err := u.Spool.Fits(line, u.N, len(jobs)); err != nil {
		return err
	}
	for i := range jobs {
		if err := u.Specs.Add(line+i, &jobs[i], validate); err != nil {
			return err
		}
		if err := u.Spool.Write(line+i, &jobs[i]); err != nil {
			return err
		}
	}
	u.N += len(jobs)
	return nil
}

// Abort discards the spooled jobs.
func (u *Upload) Abort() { u.Spool.Close() }

// Array makes the upload a job array described by spec (the --array
// text, at most 100 bytes) whose members execute at most limit at once
// (0 = no cap).
func (u *Upload) Array(spec string, limit int) error {
	if err := arrays.Check(spec, limit); err != nil {
		return err
	}
	u.IsArray, u.ArraySpec, u.ArrayLimit = true, spec, limit
	return nil
}

// SharedEnv gives every job of the upload env, under each job's own
// (bounded as a job's: protocol.ValidateEnv).
func (u *Upload) SharedEnv(env map[string]string) error {
	raw, err := sharedenv.Encode(env)
	if err != nil {
		return err
	}
	u.Env = raw
	return nil
}
