package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// A dependency on job ids (sbatch's --dependency, qsub's -W depend=,
// SGE's -hold_jid) is refused: mq waits on targets. Scripts carry the ids
// mqsub printed, so the refusal also names the targets of those jobs, as
// the CLS knows them, with the flag to write.

// depLookup bounds asking the CLS for the jobs' targets: the refusal
// stands without them.
const depLookup = 2 * time.Second

// dependencyIDs are the job ids c's dependency flag names, and the mq
// flag that waits as it does: -p for afterok, --after-any for afterany
// and -hold_jid. None when the flag names other kinds, or not only ids.
func dependencyIDs(c *cli.Context) (flag string, ids []int64) {
	var specs []string // TYPE:ID[:ID...]
	switch {
	case c.IsSet("dependency"):
		specs = strings.FieldsFunc(c.String("dependency"), func(r rune) bool { return r == ',' || r == '?' })
	case c.IsSet("W"):
		if v, ok := strings.CutPrefix(c.String("W"), "depend="); ok {
			specs = strings.Split(v, ",")
		}
	case c.IsSet("hold_jid"):
		specs = []string{"afterany:" + strings.ReplaceAll(c.String("hold_jid"), ",", ":")}
	}
	for _, s := range specs {
		parts := strings.Split(s, ":")
		f := map[string]string{"afterok": "-p", "afterany": "--after-any"}[parts[0]]
		if f == "" || (flag != "" && f != flag) || len(parts) < 2 {
			return "", nil
		}
		flag = f
		for _, p := range parts[1:] {
			id, err := strconv.ParseInt(p, 10, 64)
			if err != nil || id <= 0 {
				return "", nil
			}
			ids = append(ids, id)
		}
	}
	return flag, ids
}

// withDependencyTargets adds to err, the refusal of c's dependency on job
// ids, the targets of those jobs and the flag to write; err unchanged
// when the CLS cannot say (not running, a job it does not know).
func withDependencyTargets(c *cli.Context, env Env, err error) error {
	var ue usageError
	flag, ids := dependencyIDs(c)
	if !errors.As(err, &ue) || len(ids) == 0 || len(ids) > 20 {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, depLookup)
	defer cancel()
	cl, derr := Dial(ctx, env, c.App.Name)
	if derr != nil {
		return err
	}
	defer cl.Close()
	var targets []string
	for _, id := range ids {
		d, jerr := client.Do(ctx, cl, protocol.OpJob, protocol.JobQuery{ID: id})
		if jerr != nil {
			return err
		}
		if t := protocol.Printable(d.Target); !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	idText := make([]string, len(ids))
	for i, id := range ids {
		idText[i] = strconv.FormatInt(id, 10)
	}
	are := "job " + idText[0] + " is"
	if len(ids) > 1 {
		are = "jobs " + strings.Join(idText, ", ") + " are"
	}
	of := "target"
	if len(targets) > 1 {
		of = "targets"
	}
	ue.msg += fmt.Sprintf("; %s of %s %s: %s %s", are, of, strings.Join(targets, ", "), flag, strings.Join(targets, ","))
	return ue
}
