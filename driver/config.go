package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// Bounds of the configuration (thesis table 5.1).
const (
	MinConsumers = 2
	MaxConsumers = 512
	MinBuffer    = 100
	MaxBuffer    = 10000
)

// Defaults for zero fields of Config.
const (
	DefaultConsumers    = 4
	DefaultBuffer       = 1000
	DefaultTarget       = "driver"
	DefaultGroupTimeout = time.Second
	DefaultReconnect    = 10 * time.Minute
)

// Config configures a Driver. A zero field takes its default; a value out
// of range is an error from New, never silently clamped.
type Config struct {
	// Consumers is how many goroutines take jobs from the buffer: they
	// submit to the CLS, or, in local mode, run the jobs (so it is the
	// local parallelism). 2..512, default 4.
	Consumers int
	// Buffer is how many jobs may be issued and not yet ended: Exec blocks
	// while it is full. 100..10,000, default 1,000.
	Buffer int
	// Queue is the metaqueue queue jobs go to ("" = the default queue).
	Queue string
	// Target is the target of jobs that name none (default "driver").
	Target string
	// Dir is the working directory of jobs that name none (default: the
	// program's working directory when New is called).
	Dir string

	// Home is the MQ_HOME of the CLS to use (its socket is Home/cls.sock);
	// empty means what the commands use: $MQ_HOME, else ~/.mq.
	Home string
	// Dial, if set, opens the connection to the CLS instead of Home.
	Dial func(ctx context.Context) (io.ReadWriteCloser, error)
	// Local runs jobs in this process, up to Consumers at a time, without
	// a CLS (for trying a workflow out). Only when asked for: a driver
	// never falls back to it. Prerequisites hold as in the metaqueue, and
	// declared files (Input, Output) are checked as a placeholder checks
	// them: a missing input fails the job unrun, an output not written
	// fails it (their sizes are not compared).
	Local bool
	// Reconnect is how long to keep trying to reach a lost CLS before the
	// jobs waited on fail (default 10 min). Jobs are durable in the CLS, so
	// a restarted CLS is simply waited for.
	Reconnect time.Duration

	// GroupTimeout is how long an incomplete group bundle waits for more
	// jobs before it is sent as it is (1 ms..1 h, default 1 s).
	GroupTimeout time.Duration

	// OutDir, in local mode, keeps each job's stdout and stderr: Start
	// creates it if missing, and in it a new directory for this run
	// (run-TIME-RANDOM, see Driver.RunDir) holding KEY.out and KEY.err, so
	// an earlier run's files are never overwritten. With OutDir "" the
	// output goes to a temporary directory removed by Stop. Either way
	// Result.Stdout and Result.Stderr read it. (With a CLS, output goes
	// where the placeholder puts it and is read through the CLS.)
	OutDir string

	// Log is told what the driver does that a program may want to know:
	// reconnections to the CLS, and the CLS's warnings about submitted
	// jobs, such as one no placeholder can hold, which then waits (once
	// a run). Nil passes the warnings alone to the default logger
	// (slog.Default when the driver starts), as net/http's servers log to
	// the log package's: a wait that never ends is then explained.
	Log *slog.Logger
}

// Validate checks every field's range.
func (c Config) Validate() error {
	if c.Consumers != 0 && (c.Consumers < MinConsumers || c.Consumers > MaxConsumers) {
		return fmt.Errorf("driver: consumers must be %d..%d, not %d", MinConsumers, MaxConsumers, c.Consumers)
	}
	if c.Buffer != 0 && (c.Buffer < MinBuffer || c.Buffer > MaxBuffer) {
		return fmt.Errorf("driver: buffer size must be %d..%d, not %d", MinBuffer, MaxBuffer, c.Buffer)
	}
	if c.GroupTimeout != 0 && (c.GroupTimeout < time.Millisecond || c.GroupTimeout > time.Hour) {
		return fmt.Errorf("driver: group timeout must be 1ms..1h, not %v", c.GroupTimeout)
	}
	if c.Reconnect < 0 {
		return fmt.Errorf("driver: reconnect time must not be negative (%v)", c.Reconnect)
	}
	if c.Local && (c.Home != "" || c.Dial != nil) {
		return errors.New("driver: Local runs jobs in this process: it takes no Home or Dial")
	}
	probe := protocol.JobSpec{Queue: c.Queue, Target: c.Target, Command: "true", Cwd: c.Dir}
	if probe.Target == "" {
		probe.Target = DefaultTarget
	}
	if err := protocol.ValidateSpec(&probe); err != nil {
		return fmt.Errorf("driver: %w", err)
	}
	return nil
}

func (c *Config) fill() error {
	if c.Consumers == 0 {
		c.Consumers = DefaultConsumers
	}
	if c.Buffer == 0 {
		c.Buffer = DefaultBuffer
	}
	if c.Target == "" {
		c.Target = DefaultTarget
	}
	if c.GroupTimeout == 0 {
		c.GroupTimeout = DefaultGroupTimeout
	}
	if c.Reconnect == 0 {
		c.Reconnect = DefaultReconnect
	}
	if !c.Local && c.Home == "" && c.Dial == nil {
		home, err := client.Home()
		if err != nil {
			return fmt.Errorf("driver: %w", err)
		}
		c.Home = home
	}
	if c.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("driver: working directory: %w", err)
		}
		c.Dir = wd
	}
	if c.Log == nil {
		c.Log = slog.New(warnings{slog.Default().Handler()})
	}
	return nil
}

// warnings is a handler that passes on records of level Warn and above.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnings) WithAttrs(as []slog.Attr) slog.Handler {
	return warnings{w.Handler.WithAttrs(as)}
}

func (w warnings) WithGroup(name string) slog.Handler {
	return warnings{w.Handler.WithGroup(name)}
}
