package metaqueue

import (
	"context"
	"encoding/json"

	"github.com/mq-hpc/mq/protocol"
)

// A bulk submission (mqsub --array or -f) may carry an environment all
// its jobs share (mqsub -V, --export): stored once, as a row of
// submit_env naming the commit's ids (contiguous), not with every job. A
// job's own environment is laid over it when the job is handed out (the
// claim reads both), so a million-job array with -V stores one
// environment and each job sees it as a single job with -V would.

// SharedEnv gives every job of the bulk submission env, under each
// job's own (bounded as a job's: protocol.ValidateEnv).
func (b *Bulk) SharedEnv(env map[string]string) error {
	if len(env) == 0 {
		b.env = ""
		return nil
	}
	if err := protocol.ValidateEnv(env); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "the submission's shared environment: %v", err)
	}
	raw, err := json.Marshal(env)
	if err != nil {
		return err
	}
	b.env = string(raw)
	return nil
}

// saveSharedEnv records env (JSON) for the bulk commit's ids first..last.
func (s *Store) saveSharedEnv(first, last int64, env string) error {
	if _, err := s.w.ExecContext(context.Background(), jobsSQL.Get("InsertSubmitEnv"), first, last, env); err != nil {
		return fatalError{err}
	}
	return nil
}

// jobEnv is a job's environment: its own (JSON) over its submission's
// shared one.
func jobEnv(shared, own string) (map[string]string, error) {
	env := map[string]string{}
	for _, raw := range []string{shared, own} {
		if raw == "" {
			continue
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			return nil, err
		}
		for k, v := range m {
			env[k] = v
		}
	}
	return env, nil
}
