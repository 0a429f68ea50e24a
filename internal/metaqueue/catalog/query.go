package catalog

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// The catalog's read-only queries, for mqstat, the dashboard and the CLS's
// files commands: on the reader pool, or on the writer in the core's batch.

// Files pages through the catalog.
func Files(ctx context.Context, db Querier, q protocol.FilesQuery) (protocol.FilesReply, error) {
	var reply protocol.FilesReply
	limit := q.Limit
	if limit <= 0 || limit > 10_000 {
		limit = 1000
	}
	from := max(q.After, q.Prefix)
	rows, err := db.QueryContext(ctx, queries.Get("FilesPage"), from, q.After, len(q.Prefix), q.Prefix, limit+1)
	if err != nil {
		return reply, err
	}
	for rows.Next() {
		var f protocol.CatalogFile
		var size sql.NullInt64
		if err := rows.Scan(&f.Path, &size, &f.SHA256, &f.Producer); err != nil {
			rows.Close()
			return reply, err
		}
		if size.Valid {
			n := size.Int64
			f.Size = &n
		}
		f.Replicas = []protocol.Replica{}
		reply.Files = append(reply.Files, f)
	}
	if err := closeRows(rows); err != nil {
		return reply, err
	}
	if len(reply.Files) > limit {
		reply.Files, reply.More = reply.Files[:limit], true
	}
	if len(reply.Files) == 0 {
		return reply, nil
	}
	byPath := make(map[string]*protocol.CatalogFile, len(reply.Files))
	for i := range reply.Files {
		byPath[reply.Files[i].Path] = &reply.Files[i]
	}
	rows, err = db.QueryContext(ctx, queries.Get("ReplicasBetween"), reply.Files[0].Path, reply.Files[len(reply.Files)-1].Path)
	if err != nil {
		return reply, err
	}
	for rows.Next() {
		path, r, err := scanReplica(rows)
		if err != nil {
			rows.Close()
			return reply, err
		}
		if f := byPath[path]; f != nil {
			f.Replicas = append(f.Replicas, r)
		}
	}
	return reply, closeRows(rows)
}

func scanReplica(rows *sql.Rows) (string, protocol.Replica, error) {
	var path string
	var r protocol.Replica
	var size sql.NullInt64
	var made int64
	if err := rows.Scan(&path, &r.Site, &r.Host, &size, &r.SHA256, &made); err != nil {
		return "", r, err
	}
	r.Size = -1
	if size.Valid {
		r.Size = size.Int64
	}
	r.Made = time.UnixMicro(made).UTC().Format(time.RFC3339)
	return path, r, nil
}

// Replicas reads path's replicas, best first: the CLS host's, then by age.
func Replicas(ctx context.Context, db Querier, path string) ([]protocol.Replica, error) {
	rows, err := db.QueryContext(ctx, queries.Get("ReplicasOf"), path)
	if err != nil {
		return nil, err
	}
	var out []protocol.Replica
	for rows.Next() {
		_, r, err := scanReplica(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, r)
	}
	return out, closeRows(rows)
}

// File reads one file of the catalog with its replicas (an unknown path
// has none and no size).
func File(ctx context.Context, db Querier, path string) (protocol.CatalogFile, error) {
	f := protocol.CatalogFile{Path: path, Replicas: []protocol.Replica{}}
	var size sql.NullInt64
	err := db.QueryRowContext(ctx, queries.Get("FileRecord"), path).Scan(&size, &f.SHA256, &f.Producer)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return f, err
	}
	if size.Valid {
		n := size.Int64
		f.Size = &n
	}
	reps, err := Replicas(ctx, db, path)
	if err != nil {
		return f, err
	}
	if reps != nil {
		f.Replicas = reps
	}
	return f, nil
}

// Holding reads the places holding path, best first: a path with none is
// not found.
func Holding(ctx context.Context, db Querier, path string) ([]protocol.Replica, error) {
	out, err := Replicas(ctx, db, path)
	if err == nil && len(out) == 0 {
		err = protocol.Errorf(protocol.CodeNotFound, "no replica of %s is known", path)
	}
	return out, err
}
