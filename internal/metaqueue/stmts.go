package metaqueue

import (
	"context"
	"database/sql"

	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/internal/sqlfile"
)

// bulkRows is how many jobs one multi-row INSERT carries.
const bulkRows = 64

// stmts are the writer's prepared statements: the lifecycle's and the
// bulk insert's, prepared at open so that a statement the schema does not
// take fails the open, not a batch (the writer keeps every other text it
// runs prepared on first use: sqlfile.Conn).
type stmts struct {
	insEnv, insEnvs, insResources, insJob, insJobs, insPrereq, insPrereqs, insTargets, insQueue *sql.Stmt
	setState, finish, history, requeue, unclaim, rerun, del, insUnstarted                       *sql.Stmt
	insPlaceholder, touchPlaceholder, jobRow, jobPrereqs                                        *sql.Stmt
	jobEnd, keepAttempt, keepCommand, setCommand, insFile                                       *sql.Stmt
	set                                                                                         sqlfile.Stmts // the above, and the claims by 3n + kind
}

// dispatchN returns the statement that marks n jobs Executing for one
// placeholder, none, all or some of them prefetched (kind: claimNone,
// claimAll, claimSome; prepared on first use for each).
func (st *stmts) dispatchN(ctx context.Context, c sqlfile.Preparer, n, kind int) (*sql.Stmt, error) {
	return st.set.Keyed(ctx, c, 3*n+kind, func(n int) string { return claimSQL(n, kind) }, n)
}

func (st *stmts) prepare(ctx context.Context, c sqlfile.Preparer) error {
	for _, p := range []struct {
		s    **sql.Stmt
		name string // for errors: the query's name in its file
		sql  string
	}{
		{&st.insJob, "InsertJob", insJobSQL},
		{&st.insJobs, "InsertJob (multi-row)", insJobsSQL},
		{&st.insPrereq, "InsertPrereq", jobsSQL.Get("InsertPrereq")},
		{&st.insPrereqs, "InsertPrereq (multi-row)", sqlfile.MultiRow(jobsSQL.Get("InsertPrereq"), bulkRows)},
		{&st.insTargets, "InsertTargets", targetsSQL.Get("InsertTargets")},
		{&st.insQueue, "InsertQueue", queuesSQL.Get("InsertQueue")},
		{&st.setState, "SetState", setStateSQL},
		{&st.finish, "Finish", finishSQL},
		{&st.history, "InsertAttempt", attemptsSQL.Get("InsertAttempt")},
		{&st.requeue, "Requeue", requeueSQL},
		{&st.unclaim, "Unclaim", unclaimSQL},
		{&st.rerun, "Rerun", rerunSQL},
		{&st.del, "Delete", deleteSQL},
		{&st.insUnstarted, "InsertUnstarted", attemptsSQL.Get("InsertUnstarted")},
		{&st.insPlaceholder, "InsertPlaceholder", placeholders.Query("InsertPlaceholder")},
		{&st.touchPlaceholder, "TouchPlaceholder", placeholders.Query("TouchPlaceholder")},
		{&st.jobRow, "JobRow", jobsSQL.Get("JobRow")},
		{&st.jobPrereqs, "JobPrereqs", jobsSQL.Get("JobPrereqs")},
		{&st.jobEnd, "JobEnd", jobsSQL.Get("JobEnd")},
		{&st.insEnv, "InsertEnv", jobsSQL.Get("InsertEnv")},
		{&st.insEnvs, "InsertEnv (multi-row)", sqlfile.MultiRow(jobsSQL.Get("InsertEnv"), bulkRows)},
		{&st.insResources, "InsertResources", packing.InsertQuery()},
		{&st.insFile, "InsertFile", jobsSQL.Get("InsertFile")},
		{&st.keepAttempt, "KeepAttempt", attemptsSQL.Get("KeepAttempt")},
		{&st.keepCommand, "KeepCommand", attemptsSQL.Get("KeepCommand")},
		{&st.setCommand, "SetCommand", jobsSQL.Get("SetCommand")},
	} {
		s, err := st.set.Prepare(ctx, c, p.name, p.sql)
		if err != nil {
			st.close()
			return err
		}
		*p.s = s
	}
	return nil
}

func (st *stmts) close() { st.set.Close() }
