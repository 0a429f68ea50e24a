package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/jobids"
	"github.com/mq-hpc/mq/cmd/internal/joboutput"
	"github.com/mq-hpc/mq/internal/pathguard"
	"github.com/mq-hpc/mq/protocol"
)

// Exporting the output of a selection of jobs (mqstat --cat with a
// range, several ids, all, or -q/-t/-s), as `hq output-log cat` does:
// each job's output, in id order, preceded by a separator line naming
// the job, its latest attempt, its target and its state. The jobs are
// listed a page at a time and each output copied as it is read, so
// neither the selection nor an output is ever held whole.

// exportPage is how many jobs one listing request of an export asks for.
const exportPage = 1000

// catSel is what --cat (and the ids after it) selects.
type catSel struct {
	id     int64      // one job, printed as it is (no separator)
	ranges [][2]int64 // otherwise: ids in these ranges, in order
}

// parseCat reads --cat's value and the arguments after it: ID,
// FIRST-LAST, several of them (comma- or space-separated) or all. A lone
// id without -q, -t or -s is today's --cat ID; anything else is a
// selection, exported with separators.
func parseCat(c *cli.Context) (catSel, bool, error) {
	if c.IsSet("output") {
		return catSel{id: c.Int64("output")}, true, nil
	}
	if !c.IsSet("cat") {
		return catSel{}, false, nil
	}
	var sel catSel
	words := append([]string{c.String("cat")}, c.Args().Slice()...)
	for _, w := range words {
		for _, p := range strings.Split(w, ",") {
			switch first, last, isRange, err := jobids.Range(p); {
			case err != nil:
				return sel, true, Usagef("--cat: %v", err)
			case isRange:
				sel.ranges = append(sel.ranges, [2]int64{first, last})
			case p == "all":
				if len(words) > 1 || strings.Contains(w, ",") {
					return sel, true, Usagef("--cat all goes alone (narrow it with -q, -t, -s)")
				}
				sel.ranges = append(sel.ranges, [2]int64{1, math.MaxInt64})
			default:
				id, err := strconv.ParseInt(p, 10, 64)
				if err != nil || id <= 0 {
					return sel, true, Usagef("--cat: %q is not a job id, a range FIRST-LAST or all", p)
				}
				sel.ranges = append(sel.ranges, [2]int64{id, id})
			}
		}
	}
	if len(sel.ranges) == 1 && sel.ranges[0][0] == sel.ranges[0][1] && !c.IsSet("q") && !c.IsSet("t") && !c.IsSet("s") {
		return catSel{id: sel.ranges[0][0]}, true, nil
	}
	return sel, true, nil
}

// exportSeparator is the line before a job's output in an export.
func exportSeparator(j protocol.JobInfo, stream string) string {
	return fmt.Sprintf("==> job %d attempt %d target %s state %s %s <==\n", j.ID, j.Attempts, protocol.Printable(j.Target), protocol.Printable(j.State), stream)
}

// lineEnd remembers whether what went through it ended a line, so the
// next separator starts one.
type lineEnd struct {
	w    io.Writer
	open bool // bytes written since the last newline
}

func (l *lineEnd) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if n > 0 {
		l.open = p[n-1] != '\n'
	}
	return n, err
}

// exportOutputs writes the outputs of the jobs sel selects (narrowed by
// -q, -t, -s) to w, each after its separator line; an output that does
// not end a line gets a newline after it, so every separator starts one. A job whose
// output cannot be read is said on errw and the export goes on; the
// error returned then counts them.
func exportOutputs(ctx context.Context, c *cli.Context, cl *client.Client, w io.Writer, errw io.Writer, sel catSel) error {
	stream := "stdout"
	if c.Bool("stderr") {
		stream = "stderr"
	}
	st := protocol.Stat{Queue: c.String("q"), Target: c.String("t"), States: statesFlag(c), Limit: exportPage}
	out := &lineEnd{w: w}
	jobs, failed := 0, 0
	page := make([]protocol.JobInfo, 0, exportPage)
	var empty [][2]int64 // the ranges and ids that exported no job
	for _, r := range sel.ranges {
		before := jobs
		for from := r[0]; from <= r[1]; {
			st.From, st.To = from, r[1]
			page = page[:0]
			err := client.Stream(ctx, cl, protocol.OpStat, st, func(r protocol.StatReply) error {
				page = append(page, r.Jobs...)
				return nil
			})
			if err != nil {
				return err
			}
			ahead := newDetails(cl, page)
			for i, j := range page {
				jobs++
				call, cerr := ahead.get(i)
				if err := exportOne(ctx, out, j, stream, call, cerr); err != nil {
					failed++
					fmt.Fprintf(errw, "mqstat: job %d: %s\n", j.ID, protocol.Printable(err.Error()))
				}
			}
			if len(page) < exportPage || page[len(page)-1].ID >= r[1] {
				break
			}
			from = page[len(page)-1].ID + 1
		}
		if jobs == before && (r[0] != 1 || r[1] != math.MaxInt64) { // not all
			empty = append(empty, r)
		}
	}
	if out.open {
		if _, err := io.WriteString(out, "\n"); err != nil {
			return err
		}
	}
	if failed > 0 {
		return partialExport{fmt.Errorf("the %s of %d of the %d jobs exported could not be read whole (said above)", stream, failed, jobs)}
	}
	return exportedNone(ctx, c, cl, errw, jobs, empty)
}

// exportedNone says, after an export, which of its ranges and ids no
// job has (an error, as mqstat 5000-6000's: the export is kept; unless
// -q, -t or -s narrow it, as they do a listing), or, when it exported
// no job, that its selection matched none (no error).
func exportedNone(ctx context.Context, c *cli.Context, cl *client.Client, errw io.Writer, jobs int, empty [][2]int64) error {
	if c.IsSet("q") || c.IsSet("t") || c.IsSet("s") {
		empty = nil // a job of another queue, target or state is not unknown
	}
	unknown, err := unknownRanges(ctx, cl, empty)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return partialExport{errors.New(jobids.UnknownRanges("", unknown))}
	}
	if jobs == 0 {
		sel := []string{"--cat", c.String("cat")}
		sel = append(sel, c.Args().Slice()...)
		for _, f := range []string{"q", "t", "s"} {
			if c.IsSet(f) {
				sel = append(sel, "-"+f, c.String(f))
			}
		}
		fmt.Fprintf(errw, "mqstat: no job matches %s\n", protocol.ClipText(strings.Join(sel, " "), 300))
	}
	return nil
}

// partialExport is an export written whole but for the outputs it names
// on stderr: its file is kept, and mqstat exits non-zero.
type partialExport struct{ error }

// exportAhead is how many jobs' details an export asks for before it
// needs them: one round trip per job, one after another, would make
// the round trips the export's cost.
const exportAhead = 32

// details fetches the details of a page's jobs that ran, exportAhead
// requests in flight on the connection.
type details struct {
	cl    *client.Client
	page  []protocol.JobInfo
	calls []*client.Call[protocol.JobDetail]
	errs  []error
	next  int // the next job to ask for
}

func newDetails(cl *client.Client, page []protocol.JobInfo) *details {
	return &details{cl: cl, page: page, calls: make([]*client.Call[protocol.JobDetail], len(page)), errs: make([]error, len(page))}
}

// get is job i's pending reply (nil for a job that never ran), having
// asked for those up to exportAhead after it.
func (d *details) get(i int) (*client.Call[protocol.JobDetail], error) {
	for ; d.next < len(d.page) && d.next <= i+exportAhead; d.next++ {
		if j := d.page[d.next]; j.Attempts > 0 {
			d.calls[d.next], d.errs[d.next] = client.Go(d.cl, protocol.OpJob, protocol.JobQuery{ID: j.ID, Output: true})
		}
	}
	return d.calls[i], d.errs[i]
}

// exportOne writes job j's separator and output; call is the pending
// reply of its details (nil when it never ran), or err why none.
func exportOne(ctx context.Context, out *lineEnd, j protocol.JobInfo, stream string, call *client.Call[protocol.JobDetail], err error) error {
	if out.open {
		if _, err := io.WriteString(out, "\n"); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(out, exportSeparator(j, stream)); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	if call == nil {
		return nil // never ran: no output
	}
	d, err := call.Wait(ctx)
	if err != nil {
		return err
	}
	path := d.Stdout
	if stream == "stderr" {
		path = d.Stderr
	}
	if path == "" {
		return nil // not started yet, or its output was never written
	}
	if err := joboutput.Print(out, d, stream == "stderr"); err != nil {
		return err
	}
	if lost := protocol.LostFor(d.OutputLost, stream); lost != "" {
		return fmt.Errorf("%s was lost: %s", stream, lost)
	}
	return nil
}

// createExport opens --output-file's FILE: written beside it under a
// temporary name and renamed into place by commit, so a failed export
// never leaves a file that passes for whole; abort (after a failed
// commit too) removes the temporary file. FILE's directory is opened as pathguard opens it, and the
// temporary file made and renamed in it by descriptor: another user's
// /tmp/exports linking to a directory of ours would otherwise have the
// export replace our file of that name there. FILE gets the mode the
// shell's > would leave: an existing file's own, else 0666 less the
// umask (as cls files get writes), not the temporary file's.
func createExport(path string) (f *os.File, commit, abort func() error, err error) {
	dir, err := pathguard.OpenRoot(filepath.Dir(path))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--output-file: %w", err)
	}
	var tmp string
	for try := 0; ; try++ {
		tmp = "." + filepath.Base(path) + "." + strconv.FormatUint(rand.Uint64(), 36)
		f, err = dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil || !errors.Is(err, fs.ErrExist) || try == 9 {
			break
		}
	}
	if err != nil {
		dir.Close()
		return nil, nil, nil, fmt.Errorf("--output-file: %w", err)
	}
	if fi, err := dir.Lstat(filepath.Base(path)); err == nil && fi.Mode().IsRegular() {
		if err := f.Chmod(fi.Mode().Perm()); err != nil {
			f.Close()
			dir.Remove(tmp)
			dir.Close()
			return nil, nil, nil, fmt.Errorf("--output-file: %w", err)
		}
	}
	commit = func() error { // on an error, abort still removes tmp
		if err := f.Sync(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := dir.Rename(tmp, filepath.Base(path)); err != nil {
			return err
		}
		return dir.Close()
	}
	abort = func() error {
		defer dir.Close()
		f.Close()
		return dir.Remove(tmp)
	}
	return f, commit, abort, nil
}

// catTo runs fn writing to --output-file's FILE when one is given (its
// content only if fn succeeds), else to w.
func catTo(c *cli.Context, w io.Writer, fn func(w io.Writer) error) error {
	path := c.String("O")
	if path == "" {
		return fn(w)
	}
	f, commit, abort, err := createExport(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	err = fn(bw)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	var partial partialExport
	if err == nil || errors.As(err, &partial) {
		if cerr := commit(); cerr != nil {
			err = cerr
		} else {
			return err
		}
	}
	abort()
	return err
}
