// Package sqlscan reads a query's rows into a slice: every row scanned,
// the rows closed, and an error of the query, of a scan, of the
// iteration or of the close returned alike.
package sqlscan

import (
	"database/sql"
	"errors"
)

// All reads every row of a result with scan. It takes the query's two
// results as they come (rows, err), so that the query's error needs no
// check of its own.
func All[T any](rows *sql.Rows, err error, scan func(*sql.Rows, *T) error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, v)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	return out, nil
}

// Int64s reads a result of one integer column, such as job ids:
//
//	ids, err := sqlscan.Int64s(db.QueryContext(ctx, q, args...))
func Int64s(rows *sql.Rows, err error) ([]int64, error) {
	return All(rows, err, func(r *sql.Rows, v *int64) error { return r.Scan(v) })
}
