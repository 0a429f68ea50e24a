// Package sharedenv keeps the environment a bulk submission's jobs share
// (mqsub --array or -f with -V, --export): stored once, as a row of
// submit_env naming the commit's ids (contiguous), not with every job. A
// job's own environment is laid over it when the job is handed out (the
// claim reads both), so a million-job array with -V stores one
// environment and each job sees it as a single job with -V would.
//
// The metaqueue's core encodes the environment when the submission names
// it (Encode), saves it in the commit's transaction through its writer
// (Save) and merges it under a job's own at the claim (Merge).
package sharedenv

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"

	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed sharedenv.sql
var sharedenvSQL string

var queries = sqlfile.MustParse("sharedenv.sql", sharedenvSQL)

// Execer is the connection the module writes through: the core's writer.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Encode checks env as a job's environment is checked
// (protocol.ValidateEnv) and returns it as stored (JSON); "" for none.
func Encode(env map[string]string) (string, error) {
	if len(env) == 0 {
		return "", nil
	}
	if err := protocol.ValidateEnv(env); err != nil {
		return "", protocol.Errorf(protocol.CodeBadRequest, "the submission's shared environment: %v", err)
	}
	raw, err := json.Marshal(env)
	if err != nil {
		return "", err
	}
	return string(raw), nil
}

// Save records env (as Encode returns it) for the ids first..last.
func Save(ctx context.Context, db Execer, first, last int64, env string) error {
	_, err := db.ExecContext(ctx, queries.Get("Insert"), first, last, env)
	return err
}

// Merge is a job's environment: its own (JSON) over its submission's
// shared one.
func Merge(shared, own string) (map[string]string, error) {
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
