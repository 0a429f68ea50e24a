package cli

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/cmd/internal/arrayspec"
	"github.com/mq-hpc/mq/protocol"
)

// mqsubArray submits one job per index of --array in one transaction (the
// bulk path: chunks spooled on the CLS, one commit), each as
// arrayspec.Member makes it, and prints their ids; with -b it waits for
// them all. Members with a target each (align{}) are jobs of one
// submit but no job array: an array is of one target.
func mqsubArray(c *cli.Context, env Env, js protocol.JobSpec, shared map[string]string) error {
	a, err := arrayspec.Parse(c.String("array"))
	if err != nil {
		return Usagef("%v", err)
	}
	perTarget := strings.Contains(js.Target, "{}")
	if perTarget && a.Limit > 0 {
		return Usagef("--array %s: %%LIMIT caps an array of one target, and %s gives each member its own; give them one target, and {} in -p for each member's own prerequisite", c.String("array"), js.Target)
	}
	if _, ok := js.Env["MQ_ARRAY_INDEX"]; ok {
		return Usagef("MQ_ARRAY_INDEX is set by --array")
	}
	if err := protocol.ValidateSpec(&js); err != nil {
		return Usagef("%v", err)
	}
	if err := protocol.FillSizes(&js, os.Stat); err != nil {
		return Usagef("--in: %v", err)
	}
	seq := needsArraySeq(js.Env)
	ownFiles := slices.ContainsFunc(js.Inputs, func(f protocol.File) bool { return strings.Contains(f.Path, "{}") })
	member := func(k int64) (protocol.JobSpec, error) {
		m := arrayspec.Member(js, strconv.FormatInt(a.Index(k), 10))
		if seq {
			m.Env[protocol.EnvArraySeq] = strconv.FormatInt(k, 10)
		}
		if ownFiles { // the member's own inputs, sized as mqsub --in sizes one job's
			if err := protocol.FillSizes(&m, os.Stat); err != nil {
				return m, Usagef("--array: member %d: --in: %v", a.Index(k), err)
			}
		}
		return m, nil
	}
	// The last member has the longest index: {} made into it may make a
	// name or the command too long, which the CLS would refuse as "line
	// N" of a job file.
	last, err := member(a.Len() - 1)
	if err != nil {
		return err
	}
	if err := protocol.ValidateSpec(&last); err != nil {
		return Usagef("--array: member %d: %v", a.Index(a.Len()-1), err)
	}
	cl, err := Dial(c.Context, env, "mqsub")
	if err != nil {
		return err
	}
	defer cl.Close()
	upload := func(add func(protocol.BulkAdd) error) error {
		const chunk = 2000
		var jobs []protocol.JobSpec
		line := 1
		flush := func() error {
			if len(jobs) == 0 {
				return nil
			}
			if err := add(protocol.BulkAdd{Line: line, Jobs: jobs}); err != nil {
				return err
			}
			line += len(jobs)
			jobs = nil
			return nil
		}
		for k := range a.Len() {
			m, err := member(k)
			if err != nil {
				return err
			}
			protocol.EncodeCommand(&m)
			jobs = append(jobs, m)
			if len(jobs) == chunk {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	}
	commit := protocol.BulkCommit{Token: newToken(), Array: c.String("array"), ArrayLimit: a.Limit, Env: shared}
	if perTarget {
		commit.Array = ""
	}
	return submitBulk(c, env, cl, "--array", upload, commit)
}
