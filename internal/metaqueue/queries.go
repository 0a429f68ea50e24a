package metaqueue

import (
	_ "embed"
	"strings"

	"github.com/mq-hpc/mq/internal/sqlfile"
)

// The core's SQL is in .sql files, one per table family, each query named
// by a "-- name:" line (package sqlfile). A file is parsed once, when the
// package initialises; code names a query where it runs it. The tests
// prepare every query against a new database and check that each name the
// code asks for is in its file.
var (
	//go:embed jobs.sql
	jobsFile string
	//go:embed targets.sql
	targetsFile string
	//go:embed queues.sql
	queuesFile string
	//go:embed attempts.sql
	attemptsFile string
	//go:embed conn.sql
	connFile string
)

var (
	jobsSQL     = sqlfile.MustParse("jobs.sql", jobsFile)
	targetsSQL  = sqlfile.MustParse("targets.sql", targetsFile)
	queuesSQL   = sqlfile.MustParse("queues.sql", queuesFile)
	attemptsSQL = sqlfile.MustParse("attempts.sql", attemptsFile)
	connSQL     = sqlfile.MustParse("conn.sql", connFile)
)

// The query builders below shape a query from its file at run time, where
// what varies is a count (rows of a multi-row INSERT, ids of an IN list)
// or optional conditions: the file keeps one complete statement, which the
// tests prepare as it is.

// baseQuery is query name of q without its final ";", for a builder to
// append clauses to (WHERE, AND ..., ORDER BY, LIMIT).
func baseQuery(q sqlfile.Queries, name string) string {
	return strings.TrimSuffix(q.Get(name), ";")
}

// multiRow makes a one-row "INSERT ... VALUES (...)" insert n rows: the
// VALUES row is repeated n times.
func multiRow(insert string, n int) string {
	insert = strings.TrimSuffix(insert, ";")
	i := strings.LastIndex(insert, "VALUES")
	row := strings.TrimSpace(insert[i+len("VALUES"):])
	return insert[:i] + "VALUES " + strings.TrimSuffix(strings.Repeat(row+",", n), ",")
}

// inList expands the IN list marked "/*SLICE:name*/?" (sqlc's mark for a
// slice) in query to n parameters.
func inList(query, name string, n int) string {
	return strings.Replace(query, "/*SLICE:"+name+"*/?", strings.TrimSuffix(strings.Repeat("?,", n), ","), 1)
}
