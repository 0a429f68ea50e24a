package protocol

import (
	"fmt"
	"strconv"
	"strings"
)

// The job environment's names that carry mqsub -o and -e (JobSpec.Stdout,
// Stderr): the agent writes the job's stdout and stderr also to the files
// they name. They travel in the job's environment so that every path a job
// takes (submit, bulk spool, store, dispatch, rerun) carries them without a
// column of their own. EnvArraySeq is an array member's place in its array
// (0 for the first), set only when a pattern needs %A.
const (
	EnvStdout   = "MQ_STDOUT"
	EnvStderr   = "MQ_STDERR"
	EnvArraySeq = "MQ_ARRAY_SEQ"
)

// CheckStdioPattern checks an -o or -e pattern: a path (relative to the
// job's working directory, or absolute) in which %j, %A, %a, %x and %% are
// the only escapes, as sbatch writes them.
func CheckStdioPattern(p string) error {
	if err := CheckPath("path", p); err != nil {
		return err
	}
	if strings.HasSuffix(p, "/") {
		return fmt.Errorf("%s names a directory; give a file", Quote(p))
	}
	if name := stdioVariable(p); name != "" {
		// SGE expands $JOB_ID, $TASK_ID, $HOME... in -o paths; mq would
		// write a file of that name, the same for every job.
		return fmt.Errorf("%s: mq does not expand $%s; it expands %%j (job id), %%A (array's first id), %%a (array index), %%x (target)", Quote(p), name)
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			continue
		}
		i++
		if i == len(p) || !strings.ContainsRune("jAax%", rune(p[i])) {
			return fmt.Errorf("%s: mq expands %%j (job id), %%A (array's first id), %%a (array index), %%x (target) and %%%% (a %%)", Quote(p))
		}
	}
	return nil
}

// stdioVariable is the name of the first shell variable in p ($NAME or
// ${NAME}), or "".
func stdioVariable(p string) string {
	for _, part := range strings.Split(p, "$")[1:] {
		name, n := strings.TrimPrefix(part, "{"), 0
		for n < len(name) && (name[n] == '_' || 'A' <= name[n] && name[n] <= 'Z' || 'a' <= name[n] && name[n] <= 'z' || n > 0 && '0' <= name[n] && name[n] <= '9') {
			n++
		}
		if n > 0 {
			return name[:n]
		}
	}
	return ""
}

// ExpandStdio is pattern p with its escapes replaced: %j by the job's id,
// %A by its array's first id (its own id outside an array), %a by its
// array index (0 outside an array), %x by its target. env is the job's
// environment (NAME=VALUE), where the array's facts are.
func ExpandStdio(p string, id int64, target string, env []string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	index, first := "0", id
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "MQ_ARRAY_INDEX="); ok {
			index = v
		} else if v, ok := strings.CutPrefix(kv, EnvArraySeq+"="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 && n < id {
				first = id - n
			}
		}
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+1 == len(p) {
			b.WriteByte(p[i])
			continue
		}
		i++
		switch p[i] {
		case 'j':
			b.WriteString(strconv.FormatInt(id, 10))
		case 'A':
			b.WriteString(strconv.FormatInt(first, 10))
		case 'a':
			b.WriteString(index)
		case 'x':
			b.WriteString(target)
		default:
			b.WriteByte(p[i])
		}
	}
	return b.String()
}

// foldStdio moves a spec's Stdout and Stderr into its environment, where
// they travel (EnvStdout, EnvStderr).
func foldStdio(js *JobSpec) error {
	for _, s := range []struct {
		flag, name string
		v          *string
	}{{"stdout", EnvStdout, &js.Stdout}, {"stderr", EnvStderr, &js.Stderr}} {
		if *s.v == "" {
			continue
		}
		if err := CheckStdioPattern(*s.v); err != nil {
			return fmt.Errorf("%s: %v", s.flag, err)
		}
		if js.Env == nil {
			js.Env = map[string]string{}
		}
		js.Env[s.name] = *s.v
		*s.v = ""
	}
	return nil
}
