package cli

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/protocol"
)

// exportFlags are qsub's -V and sbatch's --export: the submitter's
// environment goes with the job. The default is NONE, as in qsub (see
// docs/guide/submitting.md, "Environment").
func exportFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "V", Aliases: []string{"export-all"}, Usage: "the job gets mqsub's whole environment (qsub's -V; --export=ALL)"},
		&cli.StringFlag{Name: "export", Usage: "what of mqsub's environment the job gets, `SPEC` as sbatch writes it: NONE (the default), ALL, or NAME[=VALUE],... (ALL first: ALL,NAME=VALUE)"},
	}
}

// notExported are names the submitter's shell sets for itself, and mq's
// own: the job's host and placeholder set their own.
var notExported = map[string]bool{
	"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true,
	"MQ_JOB_ID": true, "MQ_ATTEMPT": true, protocol.EnvAttemptID: true, "MQ_TARGET": true, "MQ_QUEUE": true, "MQ_ARRAY_INDEX": true,
	protocol.EnvArraySeq: true, protocol.EnvStdout: true, protocol.EnvStderr: true, protocol.EnvTimeLimit: true,
}

// exported is what -V or --export adds to the job's environment (nil if
// nothing), and the names left out because mq cannot carry them (not
// NAME, or a value that is not UTF-8), for a warning. environ is the
// submitter's environment (os.Environ).
func exported(c *cli.Context, environ []string) (env map[string]string, skipped []string, err error) {
	spec := c.String("export")
	switch {
	case c.Bool("V") && c.IsSet("export") && !strings.EqualFold(spec, "ALL"):
		return nil, nil, Usagef("-V is --export=ALL; give one of them")
	case c.Bool("V"):
		spec = "ALL"
	case !c.IsSet("export"):
		return nil, nil, nil
	}
	have := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			have[k] = v
		}
	}
	env = map[string]string{}
	add := func(k, v string) {
		if notExported[k] || strings.HasPrefix(k, "BASH_FUNC_") {
			// Exported shell functions (module, ml) are the shell's: the
			// job's host has its own.
			return
		}
		// The name and the value's bytes; the size is checked on the whole.
		if protocol.ValidateEnv(map[string]string{k: ""}) != nil || !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			skipped = append(skipped, k)
			return
		}
		env[k] = v
	}
	items := strings.Split(spec, ",")
	for i, item := range items {
		name, val, set := strings.Cut(item, "=")
		switch {
		case strings.EqualFold(item, "NONE") && len(items) == 1:
			return nil, nil, nil
		case strings.EqualFold(item, "ALL") && i == 0:
			for k, v := range have {
				add(k, v)
			}
		case strings.EqualFold(item, "ALL"), strings.EqualFold(item, "NONE"):
			return nil, nil, Usagef("--export %s: %s goes alone (NONE) or first (ALL,NAME=VALUE)", spec, item)
		case set:
			if err := protocol.ValidateEnv(map[string]string{name: val}); err != nil {
				return nil, nil, Usagef("--export: %v", err)
			}
			env[name] = val
		default:
			if err := protocol.ValidateEnv(map[string]string{name: ""}); err != nil {
				return nil, nil, Usagef("--export: %v", err)
			}
			if v, ok := have[name]; ok {
				add(name, v)
			}
		}
	}
	if err := protocol.ValidateEnv(env); err != nil {
		return nil, nil, Usagef("--export %s: %v: name the variables the job needs (--export=PATH,CONDA_PREFIX)", clipSpec(spec), err)
	}
	sort.Strings(skipped)
	return env, skipped, nil
}

func clipSpec(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// exportInto lays the exported environment under the job's own -v
// variables (-v wins for a name both set), warning of names left out.
func exportInto(c *cli.Context, environ func() []string, js *protocol.JobSpec) error {
	env, err := exportedEnv(c, environ)
	if err != nil || len(env) == 0 {
		return err
	}
	for k, v := range js.Env {
		env[k] = v
	}
	js.Env = env
	return nil
}

// exportedEnv is what -V or --export gives the job (nil: nothing),
// warning of names left out. With --array and -f it goes in the bulk
// commit (protocol.BulkCommit.Env): stored once for all the jobs, under
// each one's own variables.
func exportedEnv(c *cli.Context, environ func() []string) (map[string]string, error) {
	if !c.Bool("V") && !c.IsSet("export") {
		return nil, nil
	}
	if environ == nil {
		return nil, Usagef("-V and --export take the environment of mqsub run on your host; over SSH give the variables with -v NAME=VALUE")
	}
	env, skipped, err := exported(c, environ())
	if err != nil {
		return nil, err
	}
	if len(skipped) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "mqsub: warning: not exported (mq carries names of letters, digits and _, values of UTF-8 text): %s\n", protocol.Printable(strings.Join(skipped, " ")))
	}
	return env, nil
}
