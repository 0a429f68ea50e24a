package cli

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/internal/walltime"
	"github.com/mq-hpc/mq/protocol"
)

// stdioFlags are mqsub's -o and -e as qsub and sbatch mean them (the
// job's stdout and stderr files), the data flags that had those letters
// before (--in, --out: long names only, so no batch system's letter means
// something else here), and hidden flags for the spellings that are
// ambiguous now: refused with the flag to write (stdioHabits).
func stdioFlags() []cli.Flag {
	return []cli.Flag{
		&cli.GenericFlag{Name: "o", Aliases: []string{"stdout"}, Value: &countedString{}, Usage: "also write the job's stdout (and, without -e, its stderr) to `PATH` on the host it runs on, relative to its directory; %j job id, %A array's first id, %a array index, %x target", TakesFile: true},
		&cli.GenericFlag{Name: "e", Aliases: []string{"error", "stderr"}, Value: &countedString{}, Usage: "also write the job's stderr to `PATH` (as -o)", TakesFile: true},
		// --input keeps mq's old long name for a data input; --output is
		// sbatch's stdout file as well as mq's old data output: refused.
		&cli.GenericFlag{Name: "in", Aliases: []string{"input"}, Value: &fileList{}, Usage: "a file the job reads, `PATH[:SIZE]` (repeat)", TakesFile: true},
		&cli.GenericFlag{Name: "out", Value: &fileList{}, Usage: "a file the job writes, `PATH[:SIZE]` (repeat)", TakesFile: true},
		// sbatch's long name for -i, --input, is mq's old data input's.
		&cli.StringFlag{Name: "i", Aliases: []string{"old-input"}, Hidden: true},
		&cli.StringFlag{Name: "output", Hidden: true},
	}
}

// stdioHabits refuses, in one line naming what to write, the forms whose
// meaning changed: -i (a data input before; sbatch's stdin file), --output
// (mq's data output before; sbatch's stdout file), an -o that reads as a
// data output (PATH:SIZE, or repeated) and an -e that reads as an
// estimate (a time span).
func stdioHabits(c *cli.Context) error {
	if c.IsSet("i") {
		return Usagef("-i %s: a file the job reads is --in %s; the job's stdin is a redirection in COMMAND (CMD < FILE)", c.String("i"), c.String("i"))
	}
	if c.IsSet("output") {
		return Usagef("--output %s is ambiguous: the job's stdout file is -o %s (sbatch's --output); a file the job writes is --out %s", c.String("output"), c.String("output"), c.String("output"))
	}
	o := c.Generic("o").(*countedString)
	if o.n > 1 {
		return Usagef("-o given %d times: -o is the job's stdout file; a file the job writes is --out PATH[:SIZE] (repeat)", o.n)
	}
	if f, err := protocol.ParseFileArg(o.v, nil); o.n == 1 && err == nil && f.Size != nil {
		return Usagef("-o %s: -o is the job's stdout file; a file the job writes is --out %s", o.v, o.v)
	}
	e := c.Generic("e").(*countedString)
	if e.n > 1 {
		return Usagef("-e given %d times: -e is the job's stderr file", e.n)
	}
	if _, err := walltime.Parse(e.v); e.n == 1 && err == nil {
		return Usagef("-e %s: -e is the job's stderr file now (qsub's, sbatch's); the estimate is --est %s (a file of that name: -e ./%s)", e.v, e.v, e.v)
	}
	return nil
}

// stdioDirs refuses an -o or -e that names a directory on this host (the
// job's directory, -d, taken here as it is given): the job would fail
// opening it, where SGE writes JOB.oID into it.
func stdioDirs(c *cli.Context, getwd func() (string, error)) error {
	for _, f := range [][3]string{{"o", "-o", "out"}, {"e", "-e", "err"}} {
		v := c.Generic(f[0]).(*countedString).v
		if v == "" || strings.Contains(v, "%") {
			continue
		}
		p := v
		if !filepath.IsAbs(p) {
			dir := c.String("d")
			if !filepath.IsAbs(dir) {
				wd, err := getwd()
				if err != nil {
					continue
				}
				dir = filepath.Join(wd, dir)
			}
			p = filepath.Join(dir, p)
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return Usagef("%s %s is a directory; give a file in it, e.g. %s %s", f[1], v, f[1], filepath.Join(v, "%x.%j."+f[2]))
		}
	}
	return nil
}

// stdioSpec sets the job's -o and -e files on js.
func stdioSpec(c *cli.Context, js *protocol.JobSpec) {
	js.Stdout = c.Generic("o").(*countedString).v
	js.Stderr = c.Generic("e").(*countedString).v
}

// stdioSet names the first of -o, -e set on c ("" if neither).
func stdioSet(c *cli.Context) string {
	for _, f := range [][2]string{{"o", "-o"}, {"e", "-e"}} {
		if c.IsSet(f[0]) {
			return f[1]
		}
	}
	return ""
}

// needsArraySeq reports whether an -o or -e pattern in env uses %A, the
// array's first id, which an array member's job learns from its place in
// the array (protocol.EnvArraySeq).
func needsArraySeq(env map[string]string) bool {
	return strings.Contains(env[protocol.EnvStdout], "%A") || strings.Contains(env[protocol.EnvStderr], "%A")
}

// countedString is a string flag that counts how often it was given: a
// repeated -o is mq's old habit (several data outputs), not a new file.
type countedString struct {
	v string
	n int
}

func (s *countedString) Set(v string) error {
	if v == aliasCopy {
		return nil
	}
	s.v = v
	s.n++
	return nil
}

func (s *countedString) String() string { return s.v }

// Serialize is what urfave/cli copies to the flag's aliases (-e to --error).
func (s *countedString) Serialize() string { return aliasCopy }

// timeLimit is mqsub --time in seconds (0: not given): a span as --est
// takes it, more than 0.
func timeLimit(c *cli.Context) (float64, error) {
	if !c.IsSet("time") {
		return 0, nil
	}
	v := c.String("time")
	limit, err := walltime.Parse(v)
	if err != nil {
		return 0, Usagef("--time: %v", err)
	}
	if limit <= 0 {
		return 0, Usagef("--time %s: a time limit is more than 0 (no limit: leave --time out)", v)
	}
	return limit, nil
}
