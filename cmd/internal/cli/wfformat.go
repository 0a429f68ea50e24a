package cli

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/internal/wfformat"
	"github.com/mq-hpc/mq/internal/wfreplay"
	"github.com/mq-hpc/mq/protocol"
)

// maxReplayBytes bounds the bytes mqsub --wfformat makes on disk for a
// trace's own inputs, and those its jobs write: past it, the size scale
// is surely a mistake.
const maxReplayBytes = 64 << 30

// mqsubWfformat is mqsub --wfformat: the trace's tasks as jobs
// (wfreplay), its own inputs made in the current directory at their
// scaled sizes, then every job in one transaction, as mqsub -f. Each job
// asks for its task's cores and, unless --no-trace-mem, its measured
// memory; res (--mem, --gpus, --resource) is the lines' defaults, so
// --mem gives the memory of tasks the trace gives none.
func mqsubWfformat(c *cli.Context, env Env, res protocol.Resources) error {
	if c.NArg() > 0 {
		return Usagef("--wfformat takes no TARGET or COMMAND (got %q)", c.Args().First())
	}
	for _, f := range [][2]string{{"f", "-f"}, {"in", "--in"}, {"out", "--out"}, {"o", "-o"}, {"e", "-e"}, {"array", "--array"}, {"est", "--est"}, {"time", "--time"}, {"d", "-d"}} {
		if c.IsSet(f[0]) {
			return Usagef("%s does not go with --wfformat: the trace gives each job its files, runtime and place", f[1])
		}
	}
	o := wfreplay.Options{TimeScale: c.Float64("time-scale"), SizeScale: c.Float64("size-scale"), TargetPrefix: c.String("target-prefix"), Files: true, Est: true, Cores: true, Mem: !c.Bool("no-trace-mem")}
	if err := wfreplay.CheckScale(o.TimeScale); err != nil {
		return Usagef("--time-scale: %v", err)
	}
	if err := wfreplay.CheckScale(o.SizeScale); err != nil {
		return Usagef("--size-scale: %v", err)
	}
	name := c.String("wfformat")
	w, err := readTrace(env, name)
	if err != nil {
		return err
	}
	r, err := wfreplay.New(w, o)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(r.Jobs) == 0 {
		return fmt.Errorf("%s: the trace has no tasks", name)
	}
	if n := r.InputBytes(); n > maxReplayBytes {
		return fmt.Errorf("%s: its inputs would take %s at --size-scale %g, more than %s: scale them down", name, protocol.FormatBytes(n), o.SizeScale, protocol.FormatBytes(maxReplayBytes))
	}
	if n := r.OutputBytes(); n > maxReplayBytes {
		return fmt.Errorf("%s: its jobs would write %s at --size-scale %g, more than %s: scale them down", name, protocol.FormatBytes(n), o.SizeScale, protocol.FormatBytes(maxReplayBytes))
	}
	roots := prereqFlag(c)
	for i := range r.Jobs {
		if len(r.Jobs[i].Prereqs) == 0 {
			r.Jobs[i].Prereqs = roots
		}
	}
	cwd, err := getwd(env)
	if err != nil {
		return err
	}
	if !utf8.ValidString(cwd) {
		return fmt.Errorf("the working directory %s is not valid UTF-8 (mq cannot carry such a directory name exactly); replay from another", protocol.Quote(cwd))
	}
	var buf bytes.Buffer
	if err := wfreplay.WriteJSONL(&buf, r.Jobs); err != nil {
		return err
	}
	// The CLS first: with none to take the jobs, no files are made.
	cl, err := Dial(c.Context, env, "mqsub")
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := wfreplay.MakeInputs(cwd, r.Inputs); err != nil {
		return err
	}
	vars := c.Generic("v").(*envList).env
	upload := func(add func(protocol.BulkAdd) error) error {
		return splitLines(&buf, bulkChunkBytes, func(first int, data []byte) error {
			return add(protocol.BulkAdd{Line: first, Data: data, Queue: c.String("q"), Cwd: cwd, Env: vars, Defaults: res})
		})
	}
	return submitBulk(c, env, cl, name, upload, protocol.BulkCommit{Token: newToken()})
}

// readTrace reads a WfFormat file, its errors one line naming it; one
// larger than wfformat reads is refused unread.
func readTrace(env Env, name string) (*wfformat.Workflow, error) {
	f, err := openArg(env, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > wfformat.MaxBytes {
		return nil, fmt.Errorf("%s is not a WfFormat trace mq can replay: %d bytes, larger than %d MiB", name, fi.Size(), wfformat.MaxBytes>>20)
	}
	w, err := wfformat.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s is not a WfFormat trace mq can replay: %w", name, err)
	}
	return w, nil
}
