package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/argfile"
	"github.com/mq-hpc/mq/cmd/internal/arrayspec"
	"github.com/mq-hpc/mq/cmd/internal/flagorder"
	"github.com/mq-hpc/mq/cmd/internal/habits"
	"github.com/mq-hpc/mq/cmd/internal/progressview"
	"github.com/mq-hpc/mq/cmd/internal/stdincheck"
	"github.com/mq-hpc/mq/internal/walltime"
	"github.com/mq-hpc/mq/protocol"
)

// bulkChunkBytes is about how many bytes of a job file travel in one
// request (base64 in the frame: well under protocol.MaxFrame, even when the
// last line of a chunk is a long one).
const bulkChunkBytes = 1 << 20

// Mqsub returns the mqsub command.
func Mqsub(env Env) *cli.App {
	app := NewApp("mqsub", "add a job to the metaqueue", env)
	app.UsageText = `mqsub [-q QUEUE] [-p PREREQ_TARGET]... [--after-any TARGET]... [-b] [-H] [--priority N] [--est SECONDS] [--time LIMIT]
         [-d DIR] [-o PATH] [-e PATH] [--in PATH[:SIZE]]... [--out PATH[:SIZE]]...
         [-c N] [--mem SIZE] [--gpus N] [--resource NAME=N]... TARGET COMMAND...
   mqsub -f FILE [-v NAME=VALUE]...   (one JSON job per line; - reads stdin)
   mqsub --wfformat TRACE [--time-scale X] [--size-scale Y] [--target-prefix P] [-p PREREQ] [-q QUEUE]
   mqsub --rerun [-Q] ID... | FIRST-LAST
   mqsub --rerun ID --command CMD
   mqsub --rerun [-q QUEUE] [-t TARGET] [-s STATES] [--all] [-Q]`
	app.Description = `Adds a job to TARGET and prints its id (with --array or -f, one id a line;
to a terminal, the range FIRST-LAST). The job runs once every job of each
prerequisite target is done (-p: sbatch's afterok), and every job of each
--after-any target has ended, done or not (sbatch's afterany): a cleanup step
that must run even when the step before it fails. Several COMMAND words are
joined with spaces; the command runs under /bin/sh -c in DIR (default: the
current directory).
-o and -e write the job's stdout and stderr also to files, as qsub and sbatch
do (on the host the job runs on, relative to DIR; without -e, stderr goes to
-o's file; mq keeps every attempt's output too).
--in and --out declare files the job reads and writes (relative paths are in
DIR; SIZE in bytes or with a unit, 10M = 10 MiB; an input's size defaults to
the file's size now, if it exists): a queue with policy dc runs the job near
where its inputs were produced. mq's old -i, --output and -e SECONDS are
refused with the flag to write.
The job's stdin is /dev/null: data on mqsub's stdin is refused rather than
dropped (redirect in COMMAND instead; in a while-read loop, mqsub </dev/null).
The job gets none of mqsub's environment unless -V (all of it) or
--export=NAME,... says so; with --array or -f it is stored once for them
all. -v sets a variable, over what is exported.
When COMMAND runs a script (./job.sh, sh job.sh), its #MQ lines at the top
are mqsub flags too, under the command line's (#MQ --time 4:00:00 -c 8).

` + resourcesHelp
	// -v is the job's environment (qsub's habit), not --version.
	app.HideVersion = true
	app.Flags = mqsubFlags()
	app.Action = func(c *cli.Context) error { return mqsubAction(c, env) }
	app.Metadata = map[string]any{rewriteArgs: flagorder.RerunFirst(app.Flags)}
	return app
}

// mqsubFlags are mqsub's flags, made anew for each app (the lists
// gather values).
func mqsubFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.BoolFlag{Name: "version", Usage: "print the version"},
		&cli.StringFlag{Name: "q", Aliases: []string{"queue"}, Usage: "queue (created on first use)", Value: protocol.DefaultQueue},
		&cli.GenericFlag{Name: "p", Aliases: []string{"prereq", "after"}, Value: &nameList{}, Usage: "prerequisite target: every job of it done (repeat, or a comma list)"},
		&cli.StringSliceFlag{Name: "after-any", Usage: "run after every job of `TARGET` has ended, done, failed, deleted or blocked, as sbatch's --dependency=afterany (repeat, or a comma list); in a file, \"after_any\": [...]"},
		&cli.BoolFlag{Name: "b", Aliases: []string{"block"}, Usage: "wait for the job to end and exit with its exit status"},
		&cli.StringFlag{Name: "est", Aliases: []string{"estimate"}, Usage: "expected runtime: seconds, or 2h, 04:00:00, 1-12:00:00"},
		// No letter: sbatch's -t is --rerun's target here.
		&cli.StringFlag{Name: "time", Usage: "kill the job after `LIMIT` and fail it (sbatch's --time; forms as --est), also its estimate unless --est gives one; a queue's --ceiling still caps it"},
		&cli.StringFlag{Name: "d", Aliases: []string{"dir"}, Usage: "working directory of the job", TakesFile: true},
		&cli.StringFlag{Name: "f", Aliases: []string{"file"}, Usage: "add the jobs in `FILE` (JSON lines) in one transaction", TakesFile: true},
		&cli.BoolFlag{Name: "rerun", Usage: "run ended jobs (done, failed, deleted) again"},
		&cli.StringFlag{Name: "t", Aliases: []string{"target"}, Usage: "with --rerun: every ended job of this target"},
		&cli.StringFlag{Name: "s", Aliases: []string{"states"}, Usage: "with --rerun: only jobs in these states, e.g. F"},
		&cli.BoolFlag{Name: "all", Usage: "with --rerun: every ended job (in the states -s gives)"},
		&cli.BoolFlag{Name: "Q", Aliases: []string{"quiet"}, Usage: "with --rerun: print nothing but errors"},
		&cli.StringFlag{Name: "command", Usage: "with --rerun ID: the job runs `CMD` instead of its own command (mending a failed job in place: its dependents then run after it)"},
		&cli.GenericFlag{Name: "v", Aliases: []string{"env"}, Value: &envList{}, Usage: "set `NAME=VALUE` in the job's environment (repeat); with -f, every job's, unless its line's \"env\" sets NAME"},
		&cli.BoolFlag{Name: "no-replicate", Usage: "never run the job as more than one attempt at once (queues that copy running jobs: sa, wqr, --max-copies); in a file, \"no_replicate\": true"},
		// -H is sbatch's: -h is help in every mq command.
		&cli.BoolFlag{Name: "H", Aliases: []string{"hold"}, Usage: "submit held: the job does not run until mqrls releases it, and its dependents wait; in a file, \"hold\": true"},
		// No -p: it is --prereq's.
		&cli.StringFlag{Name: "priority", Usage: "run before the queue's lower-priority ready jobs: `N` in -1024..1023, higher first (default 0); in a file, \"priority\": N"},
		&cli.StringFlag{Name: "array", Usage: "submit an array of jobs, one per index of `FIRST-LAST[:STEP][%LIMIT]`, each with MQ_ARRAY_INDEX and {} in COMMAND, -p, --after-any, TARGET, -o, -e, --in and --out replaced by its index (-p 'align{}': each member waits for its own); LIMIT caps the members executing at once"},
		&cli.DurationFlag{Name: "timeout", Usage: "with -b: stop waiting (exit 1) after `DURATION`; the jobs go on"},
		&cli.StringFlag{Name: "wfformat", Usage: "replay the WfFormat workflow trace `TRACE` live: a job per task sleeping its runtime, reading and writing its files (docs/guide/workflows.md)", TakesFile: true},
		&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "with --wfformat: runtimes x `X`"},
		&cli.Float64Flag{Name: "size-scale", Value: 1, Usage: "with --wfformat: file sizes x `Y`"},
		&cli.StringFlag{Name: "target-prefix", Usage: "with --wfformat: each task's target is `P` then its id"},
	}
	flags = append(flags, stdioFlags()...)
	flags = append(flags, exportFlags()...)
	flags = append(flags, resourceFlags()...)
	return append(flags, habits.Flags()...)
}

// mqsubAction checks the flags that go together and runs the mode they
// ask for: --rerun, --wfformat, -f, or one job (or array).
func mqsubAction(c *cli.Context, env Env) error {
	if c.Bool("version") {
		cli.ShowVersion(c)
		return nil
	}
	if err := applyDirectives(c, env); err != nil {
		return err
	}
	if msg := habits.Refusal(c); msg != "" {
		return withDependencyTargets(c, env, Usagef("%s", msg))
	}
	if a := c.Args().First(); c.Bool("b") && c.NArg() > 1 && (a == "y" || a == "n") {
		// SGE's -b y runs a binary rather than a script: a target named
		// y is far likelier that.
		return Usagef("-b %s is SGE's binary flag; mq runs COMMAND as given, and its -b waits for the job: mqsub -b TARGET COMMAND", a)
	}
	if err := stdioHabits(c); err != nil {
		return err
	}
	if err := stdioDirs(c, env.Getwd); err != nil {
		return err
	}
	if c.IsSet("timeout") && !c.Bool("b") {
		return Usagef("--timeout goes with -b")
	}
	if c.Duration("timeout") < 0 {
		return Usagef("--timeout must not be negative")
	}
	if !c.IsSet("wfformat") {
		for _, f := range []string{"time-scale", "size-scale", "target-prefix"} {
			if c.IsSet(f) {
				return Usagef("--%s goes with --wfformat", f)
			}
		}
	}
	res, err := resourcesFrom(c)
	if err != nil {
		return err
	}
	switch {
	case c.Bool("rerun"):
		if f, ok := resourceSet(c); ok {
			return Usagef("%s does not go with --rerun: a job runs again as it was submitted", f)
		}
		if f := stdioSet(c); f != "" {
			return Usagef("%s does not go with --rerun: a job runs again as it was submitted", f)
		}
		if c.IsSet("time") {
			return Usagef("--time does not go with --rerun: a job runs again as it was submitted")
		}
		if c.IsSet("p") || c.IsSet("after-any") {
			return Usagef("-p and --after-any do not go with --rerun: a job runs again with its prerequisites")
		}
		if c.Bool("V") || c.IsSet("export") {
			return Usagef("-V and --export do not go with --rerun: a job runs again as it was submitted")
		}
		return mqsubRerun(c, env)
	case c.IsSet("wfformat"):
		if c.IsSet("c") {
			return Usagef("--cpus does not go with --wfformat: each job asks for its task's cores in the trace")
		}
		return mqsubWfformat(c, env, res)
	case c.IsSet("f"):
		if c.NArg() > 0 {
			return Usagef("-f takes no TARGET or COMMAND (got %q)", c.Args().First())
		}
		if c.IsSet("in") || c.IsSet("out") {
			return Usagef("--in and --out go with one job; in a file give \"inputs\" and \"outputs\" on its lines")
		}
		if c.IsSet("p") || c.IsSet("after-any") {
			return Usagef("-p and --after-any go with one job or an array; in a file give \"prereqs\" and \"after_any\" on its lines")
		}
		if f := stdioSet(c); f != "" {
			return Usagef("%s goes with one job or an array; in a file give \"stdout\" and \"stderr\" on its lines", f)
		}
		if c.IsSet("time") {
			return Usagef("--time goes with one job or an array; in a file give \"time\" (seconds) on its lines")
		}
		if c.IsSet("array") {
			return Usagef("--array goes with TARGET COMMAND; a file lists its jobs itself")
		}
		if c.IsSet("H") || c.IsSet("priority") {
			return Usagef("-H and --priority go with one job or an array; in a file give \"hold\" and \"priority\" on its lines")
		}
		return mqsubFile(c, env, res)
	}
	return mqsubJob(c, env, res)
}

// mqsubJob submits the job of the command line, or its array, and with
// -b waits for it to end.
func mqsubJob(c *cli.Context, env Env, res protocol.Resources) error {
	if t := c.String("t"); c.IsSet("t") {
		// SGE's -t 1-100 is an array, sbatch's -t 1:00:00 a time limit.
		var says []string
		if _, err := arrayspec.Parse(t); err == nil && strings.Contains(t, "-") {
			says = append(says, "an array (SGE's -t) is --array "+t)
		}
		if _, err := walltime.Parse(t); err == nil {
			says = append(says, "a time limit is --time "+t)
		}
		if len(says) > 0 {
			return Usagef("-t %s: mqsub's -t is --rerun's target; %s", t, strings.Join(says, ", "))
		}
		return Usagef("-t is only for --rerun; the target is the first argument")
	}
	for _, f := range []string{"s", "all", "Q", "command"} {
		if c.IsSet(f) {
			return Usagef("%s is only for --rerun", map[string]string{"s": "-s", "all": "--all", "Q": "-Q", "command": "--command"}[f])
		}
	}
	if c.NArg() < 1 {
		return Usagef("missing TARGET and COMMAND")
	}
	if c.NArg() < 2 {
		if dir, err := jobDir(c, env); err == nil && regularFile(dir, c.Args().First()) {
			// qsub job.sh, sbatch job.sh: a script, not a target.
			return Usagef("missing COMMAND after target %s: to run the script, mqsub NAME sh %s (its #SBATCH, #$ and #PBS lines are not read: give them as mqsub flags, or as #MQ lines in it)", c.Args().First(), c.Args().First())
		}
		return Usagef("missing COMMAND after target %s", c.Args().First())
	}
	if w := c.Args().Get(1); isAppFlag(c.App, w) {
		// mqsub T -p A CMD would run "-p A CMD" as the command.
		return Usagef("%s after target %s: mqsub's flags go before TARGET (mqsub %s ... %s COMMAND)", w, c.Args().First(), w, c.Args().First())
	} else if len(w) > 1 && w[0] == '-' {
		// No command starts with a dash: an unknown flag, or another
		// batch system's (sbatch's --wrap), would fail the job once it ran.
		f := strings.Fields(w)[0]
		return Usagef("COMMAND starts with %s, not a command: flags go before TARGET (mqsub %s ... %s COMMAND), where mqsub says what it makes of them", f, f, c.Args().First())
	}
	if why := stdincheck.Refusal(env.Stdin); why != "" {
		return Usagef("%s", why)
	}
	dir, err := jobDir(c, env)
	if err != nil {
		return err
	}
	var est float64
	if c.IsSet("est") {
		if est, err = estFlag(c); err != nil {
			return err
		}
	}
	prio, err := priorityFlag(c)
	if err != nil {
		return err
	}
	limit, err := timeLimit(c)
	if err != nil {
		return err
	}
	ins, outs, err := declaredFiles(c, dir)
	if err != nil {
		return err
	}
	js := protocol.JobSpec{
		Queue:    c.String("q"),
		Target:   c.Args().First(),
		Prereqs:  prereqFlag(c),
		AfterAny: splitList(c.StringSlice("after-any")),
		Command:  strings.Join(c.Args().Tail(), " "),
		Cwd:      dir,
		Est:      est,
		Time:     limit,
		Inputs:   ins,
		Outputs:  outs,
		Env:      c.Generic("v").(*envList).env,

		NoReplicate: c.Bool("no-replicate"),
		Resources:   res,
		Hold:        c.Bool("H"),
		Priority:    prio,
	}
	stdioSpec(c, &js)
	if !c.IsSet("array") {
		warnBraces(c, js)
	}
	if c.IsSet("array") {
		shared, err := exportedEnv(c, env.Environ)
		if err != nil {
			return err
		}
		return mqsubArray(c, env, js, shared)
	}
	if err := exportInto(c, env.Environ, &js); err != nil {
		return err
	}
	if err := protocol.ValidateSpec(&js); err != nil {
		return Usagef("%v", err)
	}
	if err := protocol.FillSizes(&js, os.Stat); err != nil {
		return Usagef("--in: %v", err)
	}
	protocol.EncodeCommand(&js)
	cl, err := Dial(c.Context, env, "mqsub")
	if err != nil {
		return err
	}
	defer cl.Close()
	reply, err := client.Do(c.Context, cl, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{js}})
	if err != nil {
		return err
	}
	id := reply.IDs[0]
	fmt.Fprintln(c.App.Writer, id)
	warn(c, reply.Warnings)
	if !c.Bool("b") {
		return nil
	}
	return waitOne(c, env, cl, id)
}

// warnBraces warns of {} where an --array member's index would go, in a
// job of no array: it stays as written (a target align{} of its own).
// {} in the command alone is find -exec's.
func warnBraces(c *cli.Context, js protocol.JobSpec) {
	names := slices.Concat([]string{js.Target, js.Stdout, js.Stderr}, js.Prereqs, js.AfterAny)
	for _, f := range slices.Concat(js.Inputs, js.Outputs) {
		names = append(names, f.Path)
	}
	if slices.ContainsFunc(names, func(s string) bool { return strings.Contains(s, "{}") }) {
		fmt.Fprintln(c.App.ErrWriter, "mqsub: warning: {} in TARGET, -p, --after-any, -o, -e, --in or --out is an --array member's index; without --array it stays as written")
	}
}

// waitOne is mqsub -b for one job: it waits for job id, across a restart
// of the CLS, and exits as the job did.
func waitOne(c *cli.Context, env Env, cl *client.Client, id int64) error {
	timeout, w := c.Duration("timeout"), protocol.WaitReply{}
	end := time.Now().Add(timeout) // across a restart of the CLS too
	ctx := c.Context
	if timeout > 0 { // also while the CLS is away, as mqwait's
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, end)
		defer cancel()
	}
	rw := waiter(env, "mqsub", c.App.ErrWriter)
	rw.Kept = fmt.Sprintf("the job is kept (mqstat -j %d once the CLS runs again)", id)
	err := rw.Wait(ctx, cl, func(cl *client.Client) (err error) {
		req := protocol.Wait{IDs: []int64{id}, TimeoutMS: int(timeout / time.Millisecond)}
		if timeout > 0 {
			req.TimeoutMS = max(1, int(time.Until(end)/time.Millisecond))
		}
		w, err = client.Do(ctx, cl, protocol.OpWait, req)
		return err
	})
	if err != nil && (c.Context.Err() != nil || ctx.Err() == nil) {
		return waitError(c.Context, id, err)
	}
	if err != nil || len(w.Jobs) == 0 {
		return exitError{code: ExitFailed, msg: fmt.Sprintf("timed out after %s: job %d has not ended (see mqstat -j %d)", timeout, id, id)}
	}
	return jobExit(w.Jobs[0])
}

// warn prints the CLS's warnings about a submission on stderr.
func warn(c *cli.Context, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s\n", c.App.Name, protocol.Printable(w))
	}
}

// waitError says why mqsub -b stopped waiting: an interrupt (Ctrl-C) or
// the CLS going away are ordinary, and the job is not lost either way.
func waitError(ctx context.Context, id int64, err error) error {
	if ctx.Err() != nil {
		return exitError{code: ExitInterrupted, msg: fmt.Sprintf("interrupted; job %d stays in the metaqueue (mqstat -j %d, mqdel %d)", id, id, id)}
	}
	return fmt.Errorf("waiting for job %d: %w", id, err) // the CLS gone for good: rewait says
}

// jobExit turns how a job ended into mqsub -b's exit.
func jobExit(e protocol.JobEnd) error {
	switch e.State {
	case "D":
		return nil
	case "F":
		code := 1
		if e.Exit != nil && *e.Exit != 0 {
			code = *e.Exit
		}
		return exitError{code: code, msg: fmt.Sprintf("job %d failed: %s", e.ID, e.Reason)}
	case "X":
		return exitError{code: ExitFailed, msg: fmt.Sprintf("job %d was deleted", e.ID)}
	case "B":
		return exitError{code: ExitFailed, msg: fmt.Sprintf("job %d is blocked: a prerequisite target has a failed or deleted job (see mqstat -j %d)", e.ID, e.ID)}
	}
	return exitError{code: ExitFailed, msg: fmt.Sprintf("job %d ended in state %s", e.ID, e.State)}
}

func jobDir(c *cli.Context, env Env) (string, error) {
	if d := c.String("d"); d != "" {
		if kind, _, ok := strings.Cut(d, ":"); (ok && strings.HasPrefix(kind, "after")) || d == "singleton" {
			// sbatch's -d is --dependency; mqsub's is the directory.
			return "", Usagef("-d %s is sbatch's dependency; mqsub's -d is the working directory: %s", d, habits.Dependency(d))
		}
		abs, err := argfile.Path(d, func() (string, error) { return getwd(env) })
		if err != nil {
			return "", err
		}
		if env.Dial == nil {
			// On the CLS host (its Unix socket): the directory the job
			// runs in is the one named here, so a mistake shows now
			// rather than when the job runs. Remote sites make it under
			// their data root; a path seen from elsewhere is not checked.
			if fi, err := os.Stat(abs); err != nil {
				return "", Usagef("-d %s: %v", protocol.Quote(abs), errors.Unwrap(err))
			} else if !fi.IsDir() {
				return "", Usagef("-d %s is not a directory", protocol.Quote(abs))
			}
		}
		return abs, nil
	}
	return getwd(env)
}

// getwd is the directory jobs run in by default, with advice when it has
// been removed under the shell.
func getwd(env Env) (string, error) {
	wd, err := env.Getwd()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("the current directory no longer exists (removed?): cd to another, or name the job's directory with -d DIR")
		}
		return "", fmt.Errorf("the current directory: %w (name the job's directory with -d DIR)", err)
	}
	return wd, nil
}

// splitList flattens repeated and comma-separated values.
func splitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func mqsubFile(c *cli.Context, env Env, res protocol.Resources) error {
	vars := c.Generic("v").(*envList).env
	shared, err := exportedEnv(c, env.Environ)
	if err != nil {
		return err
	}
	name := c.String("f")
	var r io.Reader
	if name == "-" {
		r = env.Stdin
	} else {
		f, err := openArg(env, name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	cwd, err := getwd(env)
	if err != nil {
		return err
	}
	if !utf8.ValidString(cwd) {
		return fmt.Errorf("the working directory %s is not valid UTF-8 (mq cannot carry such a directory name exactly); run mqsub -f from another", protocol.Quote(cwd))
	}
	cl, err := Dial(c.Context, env, "mqsub")
	if err != nil {
		return err
	}
	defer cl.Close()
	// The file goes up as raw lines in chunks of about 1 MiB, and the
	// server parses and validates them (naming the line of any error): one
	// parse instead of parse, encode and decode.
	upload := func(add func(protocol.BulkAdd) error) error {
		return splitLines(r, bulkChunkBytes, func(first int, data []byte) error {
			return add(protocol.BulkAdd{Line: first, Data: data, Queue: c.String("q"), Cwd: cwd, Env: vars, Defaults: res})
		})
	}
	return submitBulk(c, env, cl, displayName(name), upload, protocol.BulkCommit{Token: newToken(), Env: shared})
}

// submitBulk is the rest of a bulk submission once connected (mqsub -f,
// --array): upload spools the jobs through add, which keeps a few
// bulk.add requests in flight; then one commit, the ids printed, and with
// -b the wait for them all. Errors are prefixed with what (the file, or
// --array); any before the commit drops what was spooled.
func submitBulk(c *cli.Context, env Env, cl *client.Client, what string, upload func(add func(protocol.BulkAdd) error) error, commit protocol.BulkCommit) error {
	var inflight []*client.Call[protocol.Empty]
	wait := func(max int) error {
		for len(inflight) > max {
			if _, err := inflight[0].Wait(c.Context); err != nil {
				return err
			}
			inflight = inflight[1:]
		}
		return nil
	}
	sent := false
	add := func(req protocol.BulkAdd) error {
		sent = true
		k, err := client.Go(cl, protocol.OpBulkAdd, req)
		if err != nil {
			return err
		}
		inflight = append(inflight, k)
		return wait(4)
	}
	err := upload(add)
	if err == nil {
		err = wait(0)
	}
	if err == nil && !sent {
		// Committing nothing with a token would ask what became of it.
		return fmt.Errorf("%s: no jobs to submit; nothing was added", what)
	}
	if err != nil {
		client.Do(context.WithoutCancel(c.Context), cl, protocol.OpBulkAbort, protocol.Empty{})
		return fmt.Errorf("%s: %w; nothing was added", what, err)
	}
	reply, err := commitBulk(c.Context, env, cl, commit)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	err = printIDs(c.App.Writer, reply.First, reply.Count, progressview.IsTerminal(c.App.Writer))
	warn(c, reply.Warnings)
	if err != nil || !c.Bool("b") || reply.Count == 0 {
		return err
	}
	return waitRange(c, env, cl, reply.First, reply.First+int64(reply.Count)-1)
}

// printIDs prints the ids of count jobs from first, one a line for a
// script to read; to a terminal, many of them as one range
// (FIRST-LAST, as mqdel and mqstat take ids), since a million lines
// scrolling past would hold the terminal for minutes and say no more.
func printIDs(out io.Writer, first int64, count int, tty bool) error {
	if tty && count > 1 {
		_, err := fmt.Fprintf(out, "%d-%d\n", first, first+int64(count)-1)
		return err
	}
	w := bufio.NewWriterSize(out, 64<<10)
	var b []byte
	for i := 0; i < count; i++ {
		b = strconv.AppendInt(b[:0], first+int64(i), 10)
		b = append(b, '\n')
		w.Write(b)
	}
	return w.Flush()
}

// waitRange is mqsub -b for many jobs (a file, an array): it waits for
// the jobs First..Last, with a bar on stderr if that is a terminal, and
// fails naming the jobs that did not end done.
func waitRange(c *cli.Context, env Env, cl *client.Client, first, last int64) error {
	v := &progressview.View{Out: c.App.ErrWriter, TTY: progressview.IsTerminal(c.App.ErrWriter)}
	end, err := progressview.Follow(c.Context, cl, waiter(env, "mqsub", c.App.ErrWriter), protocol.Progress{First: first, Last: last}, v, c.Duration("timeout"))
	if err != nil {
		return err
	}
	return notDoneError(end)
}

// commitBulk commits the bulk spooled on cl with token. If the connection
// dies before the reply, the jobs may or may not have been added; it asks
// once more on a new connection what became of the token, and says
// "outcome unknown" only if it cannot learn.
func commitBulk(ctx context.Context, env Env, cl *client.Client, bc protocol.BulkCommit) (protocol.SubmitReply, error) {
	token := bc.Token
	reply, err := client.Do(ctx, cl, protocol.OpBulkCommit, bc)
	var perr *protocol.Error
	if err == nil || errors.As(err, &perr) {
		// A refusal is one transaction's: nothing was added.
		if err != nil {
			err = fmt.Errorf("%w; nothing was added", err)
		}
		return reply, err
	}
	lost := err
	if ctx.Err() != nil {
		return reply, fmt.Errorf("outcome unknown: interrupted during the commit; check with mqstat before resubmitting")
	}
	cl.Close()
	var cl2 *client.Client
	for _, d := range []time.Duration{0, 200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second} {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return reply, fmt.Errorf("outcome unknown: the connection to the CLS was lost during the commit (%v); check with mqstat before resubmitting", lost)
		}
		if cl2, err = Dial(ctx, env, "mqsub"); err == nil {
			break
		}
	}
	if err != nil {
		return reply, fmt.Errorf("outcome unknown: the connection to the CLS was lost during the commit (%v) and it cannot be reached again (%v); check with mqstat before resubmitting", lost, err)
	}
	defer cl2.Close()
	reply, err = client.Do(ctx, cl2, protocol.OpBulkCommit, protocol.BulkCommit{Token: token})
	switch {
	case err == nil:
		return reply, nil
	case protocol.IsCode(err, protocol.CodeNotFound):
		return reply, fmt.Errorf("the connection to the CLS was lost during the commit (%v); the CLS has no record of it: nothing was added", lost)
	}
	return reply, fmt.Errorf("outcome unknown: the connection to the CLS was lost during the commit (%v) and asking again failed (%v); check with mqstat before resubmitting", lost, err)
}

// newToken returns a random idempotency token.
func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return "mqsub-" + hex.EncodeToString(b[:])
}

// splitLines cuts r into chunks of whole lines of about size bytes and
// calls send with each chunk and the number of its first line.
func splitLines(r io.Reader, size int, send func(first int, data []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	chunk := make([]byte, 0, size+64<<10)
	first, line := 1, 1
	lineStart := 0
	for {
		b, err := br.ReadSlice('\n')
		chunk = append(chunk, b...)
		if len(chunk)-lineStart > protocol.MaxJobLine {
			return fmt.Errorf("line %d: longer than %d bytes", line, protocol.MaxJobLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if len(b) > 0 && b[len(b)-1] == '\n' {
			line++
			lineStart = len(chunk)
		}
		if len(chunk) >= size || (err == io.EOF && len(chunk) > 0) {
			// A cut always falls after a newline (or at the end).
			if serr := send(first, chunk); serr != nil {
				return serr
			}
			chunk = make([]byte, 0, size+64<<10)
			first, lineStart = line, 0
		}
		if err == io.EOF {
			return nil
		}
	}
}

func displayName(name string) string {
	if name == "-" {
		return "stdin"
	}
	return name
}

func mqsubRerun(c *cli.Context, env Env) error {
	sel, err := selection(c, "DFX")
	if err != nil {
		return err
	}
	req := protocol.Rerun{Select: sel}
	if c.IsSet("command") {
		if len(sel.IDs) != 1 || sel.First != 0 || sel.Queue != "" || sel.Target != "" || sel.States != "" || sel.All {
			return Usagef("--command reruns one job: name it by its id (mqsub --rerun ID --command CMD)")
		}
		if c.String("command") == "" {
			return Usagef("--command: the new command is empty")
		}
		req.Command, req.CommandBytes = protocol.WireCommand(c.String("command"))
		if _, err := req.NewCommand(); err != nil {
			return Usagef("--command: %v", err)
		}
	}
	cl, err := Dial(c.Context, env, "mqsub")
	if err != nil {
		return err
	}
	defer cl.Close()
	reply, err := client.Do(c.Context, cl, protocol.OpRerun, req)
	if err != nil {
		return cutShort(err, batchesDone("mqsub --rerun"))
	}
	if err := atomicErrors("rerun", reply); err != nil {
		return err
	}
	if reply.Acted() == 0 {
		return nothingActed(c, cl, sel, "DFX", "rerun")
	}
	if !c.Bool("Q") {
		return listActed(c, "rerun", reply, "%d\n")
	}
	return nil
}

// envList collects repeated -v NAME=VALUE values (a value may hold
// commas and '=').
type envList struct{ env map[string]string }

// aliasCopy is what urfave/cli hands Set when it copies a set flag to its
// aliases (-v to --env): no argument can hold a NUL byte, so it is never a
// variable someone gave.
const aliasCopy = "\x00alias copy"

// Serialize is what urfave/cli copies to the flag's aliases.
func (l *envList) Serialize() string { return aliasCopy }

func (l *envList) Set(v string) error {
	if v == aliasCopy {
		return nil
	}
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("%q is not NAME=VALUE", v)
	}
	if l.env == nil {
		l.env = map[string]string{}
	}
	l.env[k] = val
	return protocol.ValidateEnv(map[string]string{k: val})
}

func (l *envList) String() string { return strings.Join(protocol.EnvList(l.env), " ") }

// priorityFlag reads --priority: a whole number in the range qsub -p
// takes (0 when not given).
func priorityFlag(c *cli.Context) (int, error) {
	if !c.IsSet("priority") {
		return 0, nil
	}
	v := c.String("priority")
	p, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || protocol.CheckPriority(p) != nil {
		return 0, Usagef("--priority: want a whole number in %d..%d (higher runs first), not %q", protocol.MinPriority, protocol.MaxPriority, v)
	}
	return p, nil
}

// regularFile reports whether path, relative to dir, names a regular file.
func regularFile(dir, path string) bool {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// isAppFlag says whether word is one of app's visible flags (-p,
// --prereq=T), not a hint's.
func isAppFlag(app *cli.App, word string) bool {
	if len(word) < 2 || word[0] != '-' || strings.ContainsAny(word, " \t") {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimLeft(word, "-"), "=")
	for _, f := range app.Flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue // a hint's: another batch system's spelling
		}
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}
