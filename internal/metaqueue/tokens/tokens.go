// Package tokens keeps submit idempotency tokens: a submit or bulk commit
// that carries a token records it with its ids (the submits table), so a
// client that resends the request after losing the reply gets those ids
// back instead of adding the jobs again. Tokens are forgotten after TTL.
//
// The metaqueue's core asks IDs before adding jobs and calls Save in the
// same transaction, and Prune on its tick; the module reads and writes
// through the core's writer (an Execer) and takes the time from the core.
package tokens

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"time"

	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed tokens.sql
var tokensSQL string

var queries = sqlfile.MustParse("tokens.sql", tokensSQL)

// Execer is the connection the module reads and writes through: the
// core's writer (*sql.Conn, *sql.Tx).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// MaxLen is the longest token, in bytes.
const MaxLen = 128

// TTL is how long a token is remembered. A client resends a submit after
// reconnecting (the driver tries for minutes), so a day is ample, and the
// table stays small however many requests a driver makes.
const TTL = 24 * time.Hour

// pruneEvery is how often at most Prune runs.
const pruneEvery = time.Hour

// Check validates a token's length (empty: none).
func Check(token string) error {
	if len(token) > MaxLen {
		return protocol.Errorf(protocol.CodeBadRequest, "token is %d bytes; the limit is %d", len(token), MaxLen)
	}
	return nil
}

// IDs returns the ids of an earlier submit with this token, or nil.
func IDs(ctx context.Context, ex Execer, token string) ([]int64, error) {
	if token == "" {
		return nil, nil
	}
	var first int64
	var n int
	err := ex.QueryRowContext(ctx, queries.Get("ByToken"), token).Scan(&first, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = first + int64(i)
	}
	return ids, nil
}

// Save remembers a submit's token with its ids first..first+n-1, made at
// now, in the submit's transaction.
func Save(ctx context.Context, ex Execer, token string, first int64, n int, now time.Time) error {
	if token == "" {
		return nil
	}
	_, err := ex.ExecContext(ctx, queries.Get("InsertSubmit"), token, first, n, now.UnixMicro())
	return err
}

// Pruner remembers when tokens were last pruned. The zero value prunes
// at its first tick.
type Pruner struct {
	last time.Time
}

// Due says whether tokens are to be pruned at now (at most once an hour),
// and if so counts now as the last prune.
func (p *Pruner) Due(now time.Time) bool {
	if now.Sub(p.last) < pruneEvery {
		return false
	}
	p.last = now
	return true
}

// Prune forgets tokens older than TTL at now.
func Prune(ctx context.Context, ex Execer, now time.Time) error {
	_, err := ex.ExecContext(ctx, queries.Get("Expire"), now.Add(-TTL).UnixMicro())
	return err
}
