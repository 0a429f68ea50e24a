package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mq-hpc/mq/protocol"
)

// Cmd is a job built like an exec.Cmd: a program and its arguments (no
// shell quoting by the caller), a directory, environment and standard
// input. Fields are read by Start; a Cmd runs once.
//
// Its line is Args quoted for the POSIX shell every placeholder runs jobs
// with (see Quote and ShellLine), wrapped to set Env and Stdin: String shows
// it.
//
// Where it differs from exec.Cmd, by design, since a job may run on
// another host and its output stays there until it ends:
//   - There are no Stdout and Stderr writers, nor pipes: the output is read
//     once the job has ended, with Output, CombinedOutput or Result's
//     Stdout, Stderr and Open, up to MaxOutput per stream (mqstat --cat
//     --follow watches it as it is written).
//   - A program not found where the job runs is exit status 127 from Wait
//     (the shell says so on the job's stderr), not an error from Start; so
//     is a Dir missing there (the *ExitError names it).
//   - A job killed by signal N has exit status 128+N (ExitCode, Result.Exit),
//     where exec.ExitError.ExitCode says -1.
//   - When the context ends first, the job is deleted (SIGTERM, then
//     SIGKILL a second later, as a placeholder does; there are no Cancel or
//     WaitDelay fields) and Wait returns a *JobError wrapping the context's
//     error, not the exit of a killed process. A job that ended before the
//     context did is reported as it ended.
//   - Env adds to the environment the job inherits from its placeholder
//     (from this program only in local mode); Dir must be absolute; Stdin
//     is read whole by Start.
type Cmd struct {
	// Args holds the program, then its arguments. The program is looked up
	// in PATH where the job runs.
	Args []string
	// Dir is the job's working directory (absolute); "" means
	// Config.Dir.
	Dir string
	// Env adds "NAME=value" entries to the job's environment (see the Env
	// option): unlike exec.Cmd's, it does not replace the environment the
	// job inherits from its placeholder.
	Env []string
	// Stdin, if not nil, is read to its end by Start and becomes the job's
	// standard input: at most MaxStdin bytes, which travel in the job's
	// environment (in its command line only when the environment has no
	// room left). For more, use StdinFile. Without either the job reads
	// /dev/null.
	Stdin io.Reader
	// StdinFile names a file on the job's host to be its standard input
	// (see the StdinFile option).
	StdinFile string
	// Options adds what else the job needs (Target, Group, Prereqs, Input,
	// ...).
	Options []Option
	// Resources is what the job asks of a placeholder: its cores, memory,
	// GPUs and named amounts (mqsub -c, --mem, --gpus, --resource). The
	// zero value is one slot. Like exec.Cmd's SysProcAttr, it says how the
	// job is run, not what it runs.
	Resources protocol.Resources

	// Key is the job's key once Start has issued it.
	Key Key
	// Result is how the job ended, once Wait has returned (like
	// exec.Cmd.ProcessState).
	Result *Result

	ctx      context.Context
	p        *Producer
	combined bool
	started  bool
	waited   bool
}

// Command returns a Cmd that runs name with args from the default producer.
// As with exec.Command, a problem (no program, a NUL byte) surfaces from
// Start.
func (d *Driver) Command(name string, args ...string) *Cmd {
	return d.def.CommandContext(context.Background(), name, args...)
}

// CommandContext is Command with a context that bounds the job's life:
// if ctx ends before the job does, the job is deleted (killed if running),
// as with exec.CommandContext; Wait then returns an error wrapping ctx's.
func (d *Driver) CommandContext(ctx context.Context, name string, args ...string) *Cmd {
	return d.def.CommandContext(ctx, name, args...)
}

// CommandContext is Driver.CommandContext for this producer.
func (p *Producer) CommandContext(ctx context.Context, name string, args ...string) *Cmd {
	return &Cmd{Args: append([]string{name}, args...), ctx: ctx, p: p}
}

// Errors of a Cmd's life cycle.
var (
	ErrCmdStarted    = errors.New("driver: Cmd already started")
	ErrCmdNotStarted = errors.New("driver: Cmd not started")
	ErrCmdWaited     = errors.New("driver: Wait was already called")
)

// String returns the shell line the job runs (its command, as mqstat shows
// it), or the reason there is none.
func (c *Cmd) String() string {
	line, _, err := c.line()
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return line
}

// line builds the job's command line and the options that complete it.
// It reads Stdin: call once per start.
func (c *Cmd) line() (string, []Option, error) {
	line, err := ShellLine(c.Args)
	if err != nil {
		return "", nil, err
	}
	var o execOptions
	for _, opt := range c.Options {
		opt(&o)
	}
	o.wrap.env = append(o.wrap.env, c.Env...)
	o.wrap.combined = o.wrap.combined || c.combined
	if c.StdinFile != "" {
		o.wrap.stdinFile = c.StdinFile
	}
	if c.Stdin != nil {
		data, err := io.ReadAll(io.LimitReader(c.Stdin, MaxStdin+1))
		if err != nil {
			return "", nil, fmt.Errorf("reading Stdin: %w", err)
		}
		if len(data) > MaxStdin {
			return "", nil, fmt.Errorf("Stdin holds more than %d bytes (MaxStdin): give a file (StdinFile) instead", MaxStdin)
		}
		o.wrap.stdin, o.wrap.hasStdin = data, true
	}
	env, err := o.wrap.private()
	if err != nil {
		return "", nil, err
	}
	script, err := o.wrap.script(line)
	if err != nil {
		return "", nil, err
	}
	opts := append([]Option{}, c.Options...)
	if c.Dir != "" {
		opts = append(opts, Dir(c.Dir))
	}
	if c.Resources.Asks() {
		opts = append(opts, Resources(c.Resources))
	}
	opts = append(opts, func(o *execOptions) { o.wrap, o.env = wrap{}, env }) // already in script and env
	return script, opts, nil
}

// Start issues the job (Exec) and returns once it is in the driver's
// buffer.
func (c *Cmd) Start() error {
	if c.started {
		return ErrCmdStarted
	}
	if c.p == nil {
		return errors.New("driver: Cmd not made by Command or CommandContext")
	}
	c.started = true
	if c.ctx == nil {
		c.ctx = context.Background()
	}
	script, opts, err := c.line()
	if err != nil {
		return fmt.Errorf("driver: %w", err)
	}
	k, err := c.p.Exec(c.ctx, script, opts...)
	if err != nil {
		return err
	}
	c.Key = k
	return nil
}

// Wait waits for the job to end and sets Result. It returns nil for exit
// status 0, an *ExitError for another, and a *JobError for a job with no
// exit status (deleted, blocked, lost; it wraps ctx's error if the job was
// deleted because the Cmd's context ended).
func (c *Cmd) Wait() error {
	if !c.started || c.Key == 0 {
		return ErrCmdNotStarted
	}
	if c.waited {
		return ErrCmdWaited
	}
	c.waited = true
	res, err := c.p.d.WaitForOne(c.ctx, c.Key)
	c.Result = &res
	if err != nil {
		if res.Err == nil && c.ctx.Err() != nil {
			// The wait gave up: the job is deleted (WaitForOne).
			res.Err = &JobError{Key: c.Key, ID: res.ID, State: "X", Reason: "cancelled", Cause: context.Cause(c.ctx)}
			return res.Err
		}
		return err
	}
	if res.Exit != 0 {
		return &ExitError{Result: res}
	}
	return nil
}

// Run starts the job and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the job and returns its standard output. If the job exits
// non-zero, the error is an *ExitError whose Stderr holds its standard
// error, as exec.Cmd.Output's does; output over MaxOutput also makes it
// wrap ErrOutputTooLarge.
func (c *Cmd) Output() ([]byte, error) {
	if c.started { // else Run's error would come with an earlier run's output
		return nil, ErrCmdStarted
	}
	err := c.Run()
	if c.Result == nil || c.Result.out == nil {
		return nil, err
	}
	ctx := context.WithoutCancel(c.ctx)
	out, oerr := c.Result.Stdout(ctx)
	var ee *ExitError
	if errors.As(err, &ee) {
		ee.Stderr, _ = c.Result.Stderr(ctx)
	}
	return out, outputErr(err, oerr)
}

// outputErr is Output's error: the run's, and the read's (oerr) when the
// run had none or the output was cut short, which a caller of a failed
// job must also learn (errors.As finds the *ExitError, errors.Is
// ErrOutputTooLarge).
func outputErr(err, oerr error) error {
	switch {
	case err == nil:
		return oerr
	case errors.Is(oerr, ErrOutputTooLarge):
		return errors.Join(err, oerr)
	}
	return err
}

// CombinedOutput runs the job with its standard error going to its
// standard output, interleaved as written, and returns that.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	if c.started {
		return nil, ErrCmdStarted
	}
	c.combined = true
	err := c.Run()
	if c.Result == nil || c.Result.out == nil {
		return nil, err
	}
	out, oerr := c.Result.Stdout(context.WithoutCancel(c.ctx))
	return out, outputErr(err, oerr)
}

// ExitError is a job's non-zero exit status, as exec.ExitError is a
// process's.
type ExitError struct {
	Result Result
	// Stderr holds the job's standard error when Cmd.Output returned this
	// error (up to MaxOutput bytes).
	Stderr []byte
}

func (e *ExitError) Error() string {
	s := fmt.Sprintf("exit status %d", e.Result.Exit)
	if e.Result.Exit > 128 && e.Result.Exit < 128+65 {
		s += fmt.Sprintf(" (signal %d)", e.Result.Exit-128)
	}
	// The reason says more when the job could not start (exit 127: a
	// missing directory, say) or was killed; else it repeats the status.
	if r := e.Result.Reason; r != "" && !strings.HasPrefix(r, "exit status ") {
		s += ": " + r
	}
	return s
}

// ExitCode returns the job's exit status: 128+N if it was killed by
// signal N (exec.ExitError's says -1).
func (e *ExitError) ExitCode() int { return e.Result.Exit }
