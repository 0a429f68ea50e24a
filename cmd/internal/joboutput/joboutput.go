// Package joboutput is a job's output as mqstat shows it: --cat (Print),
// --cat --follow (Follow), and the lines of -j that say where it lies
// (Line).
package joboutput

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Print copies a job's stdout (or stderr). Local placeholders write
// where the CLS is; remote ones copy the output here while a long job runs
// and when it ends.
func Print(w io.Writer, d protocol.JobDetail, stderr bool) error {
	path, cp, ext, st := d.Stdout, d.StdoutCopy, d.StdoutStream, outstream.Stdout
	if stderr {
		path, cp, ext, st = d.Stderr, d.StderrCopy, d.StderrStream, outstream.Stderr
	}
	if path == "" {
		if len(d.State) == 1 && job.State(d.State[0]).Terminal() {
			return fmt.Errorf("job %d never ran: it has no output (state %s)", d.ID, StateName(d.State))
		}
		return fmt.Errorf("job %d has no output yet (state %s)", d.ID, StateName(d.State))
	}
	if ext != nil && cp == "" {
		// In its placeholder's stream file, checked chunk by chunk: an
		// output torn by a crash is an error, never printed half.
		t := outstream.Tag{Job: d.ID, Attempt: ext.Attempt, Stream: st}
		if _, err := outstream.ReadFile(w, ext.Path, t, outstream.Extent{Last: ext.Last, Bytes: ext.Bytes, Cut: ext.Cut}); err != nil {
			return fmt.Errorf("job %d's output: %w", d.ID, err)
		}
		return nil
	}
	// Opened as every reader of output opens it (outstream.OpenFile): a
	// job may leave a FIFO or a link where its output was, and mqstat may
	// run inside the CLS (over SSH).
	if cp != "" {
		f, _, err := outstream.OpenFile(cp)
		if errors.Is(err, os.ErrNotExist) {
			if d.State == string(job.Executing) {
				return fmt.Errorf("job %d is running on host %s; none of its output has reached here yet (mqstat --cat %d --follow waits for it; meanwhile: %s there)", d.ID, d.Host, d.ID, path)
			}
			return nil // nothing was staged: the job wrote nothing
		}
		if err != nil {
			return fmt.Errorf("job %d's output: %w", d.ID, err)
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	}
	f, _, err := outstream.OpenFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if d.State == string(job.Executing) {
			// Streamed, it is in no file until its placeholder ships it:
			// an empty answer read as "the job printed nothing".
			return fmt.Errorf("job %d is running; its output is in no file yet (mqstat --cat %d --follow shows it as it is written)", d.ID, d.ID)
		}
		return nil // output files are made at the first byte: none means no output
	}
	if err != nil {
		return fmt.Errorf("job %d's output: %w", d.ID, err)
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// Line says where job d's stdout (or stderr) is: its file (on
// its host), or its extent in a stream file. An output of this host (here)
// in neither says what it is: an ended attempt's (kept whole) wrote
// nothing when its stream has no extent while the other has one (its
// placeholder streams) or its file was never made (files are made at the
// first byte); a running attempt's is not in a file yet, and mqstat
// --cat --follow reads it wherever it is.
func Line(d protocol.JobDetail, stderr, here bool) string {
	path, ext, other, flag := d.Stdout, d.StdoutStream, d.StderrStream, ""
	if stderr {
		path, ext, other, flag = d.Stderr, d.StderrStream, d.StdoutStream, " --stderr"
	}
	where := ""
	if d.Host != "" {
		where = " (on " + d.Host + ")"
	}
	if ext != nil {
		cut := ""
		if ext.Cut {
			cut = ", cut at its cap"
		}
		return fmt.Sprintf("%d bytes in stream %s (last chunk at %d%s)%s", ext.Bytes, ext.Path, ext.Last, cut, where)
	}
	switch ended := d.Finished != "" && d.OutputLost == ""; {
	case ended && (other != nil || here && neverMade(path)):
		return "nothing written"
	case d.Finished == "" && (d.State == string(job.Executing) || d.State == string(job.Prefetched)) && here && neverMade(path):
		return fmt.Sprintf("in no file yet (mqstat --cat %d%s --follow shows it as it is written)", d.ID, flag)
	case d.Streaming:
		return fmt.Sprintf("in a stream file%s until it ends (mqstat --cat %d%s --follow shows it as it is written)", where, d.ID, flag)
	}
	return path + where
}

// neverMade says whether path does not exist (an error other than that
// says nothing).
func neverMade(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist)
}

// ThisHost is this host's name, as local placeholders report it ("" if
// unknown).
func ThisHost() string {
	h, _ := os.Hostname()
	return h
}

// Follow prints a stream of job id's output as the CLS serves it
// (op output.stream): what was written, then what is written until the job
// ends. The bytes are the job's, printed as they are, as --output prints
// them; mqstat's own lines go to errw. It returns how the job ended, as
// mqsub -b reports it.
func Follow(ctx context.Context, cl *client.Client, w *bufio.Writer, errw io.Writer, id int64, stream string) (protocol.JobEnd, error) {
	var end *protocol.OutputFrame
	attempt := 0
	err := client.Stream(ctx, cl, protocol.OpOutputStream, protocol.OutputQuery{ID: id, Stream: stream, Follow: true}, func(f protocol.OutputFrame) error {
		if f.End != nil {
			end = &f
			return nil
		}
		if attempt != 0 && f.Attempt != attempt {
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(errw, "mqstat: job %d: attempt %d started; its %s follows\n", id, f.Attempt, stream)
		}
		attempt = f.Attempt
		w.Write(f.Data)
		return w.Flush() // as it comes: someone is watching
	})
	if err != nil {
		return protocol.JobEnd{}, err
	}
	if err := w.Flush(); err != nil {
		return protocol.JobEnd{}, err
	}
	if end == nil {
		return protocol.JobEnd{}, fmt.Errorf("job %d: its output ended before the job did", id)
	}
	if end.Lost != "" {
		if end.End.State == "D" {
			return protocol.JobEnd{}, fmt.Errorf("job %d's %s was lost: %s", id, stream, end.Lost)
		}
		fmt.Fprintf(errw, "mqstat: job %d's %s was lost: %s\n", id, stream, protocol.Printable(end.Lost))
	}
	return *end.End, nil
}

// StateName is a state's letter with its name, "F (failed)".
func StateName(letter string) string {
	if len(letter) == 1 {
		return letter + " (" + job.State(letter[0]).Name() + ")"
	}
	return letter
}
