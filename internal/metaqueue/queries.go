package metaqueue

import (
	_ "embed"

	"github.com/mq-hpc/mq/internal/sqlfile"
)

// The core's SQL is in .sql files, one per table family, each query named
// by a "-- name:" line (package sqlfile). A file is parsed once, when the
// package initialises; code names a query where it runs it. The tests
// prepare every query against a new database and check that each name the
// code asks for is in its file. Where what varies is a count (rows of a
// multi-row INSERT, ids of an IN list) or optional conditions, code shapes
// the query from its file at run time (sqlfile's Base, MultiRow, InList):
// the file keeps one complete statement, which the tests prepare as it is.
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
