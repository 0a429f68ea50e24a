package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/mq-hpc/mq/protocol"
)

// Stream names one of a job's output streams.
type Stream int

// A job's output streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("Stream(%d)", int(s))
}

// MaxOutput is the most of each stream the driver reads: what `mqstat
// --output` gives of a remote job's output, staged to the CLS up to this
// size (64 MiB). Past it Open and Stdout return ErrOutputTooLarge; read
// such output on the host that ran the job (mqstat -j shows where).
const MaxOutput = protocol.MaxOutput

// ErrOutputTooLarge is wrapped by the error for a stream over MaxOutput.
var ErrOutputTooLarge = errors.New("output larger than the driver reads (MaxOutput)")

// ErrOutputLost is wrapped by the error for a stream that was not wholly
// kept (a full disk where the placeholder wrote it, a failed copy to the
// CLS): the bytes read before it are all there is.
var ErrOutputLost = errors.New("output not wholly kept")

// outputSource reads a job's output where its backend keeps it.
type outputSource interface {
	open(ctx context.Context, r *Result, s Stream) (io.ReadCloser, error)
}

// Open returns a reader of the job's stream (stdout or stderr). The job
// should have ended: through a CLS, the output of a job running on a
// remote host reaches the CLS only when it ends. ctx bounds the reads.
// A stream larger than MaxOutput is an error wrapping ErrOutputTooLarge;
// one not wholly kept ends with an error wrapping ErrOutputLost.
func (r Result) Open(ctx context.Context, s Stream) (io.ReadCloser, error) {
	if s != Stdout && s != Stderr {
		return nil, fmt.Errorf("driver: no output stream %v", s)
	}
	if r.out == nil {
		return nil, fmt.Errorf("driver: %s has no %v: it never ran", r.name(), s)
	}
	return r.out.open(ctx, &r, s)
}

// Stdout returns the job's standard output (see Open).
func (r Result) Stdout(ctx context.Context) ([]byte, error) { return r.readAll(ctx, Stdout) }

// Stderr returns the job's standard error (see Open).
func (r Result) Stderr(ctx context.Context) ([]byte, error) { return r.readAll(ctx, Stderr) }

func (r Result) readAll(ctx context.Context, s Stream) ([]byte, error) {
	rc, err := r.Open(ctx, s)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var b bytes.Buffer
	n, err := b.ReadFrom(io.LimitReader(rc, MaxOutput+1))
	if err == nil && n > MaxOutput {
		return b.Bytes()[:MaxOutput], fmt.Errorf("driver: %s's %v: %w", r.name(), s, ErrOutputTooLarge)
	}
	return b.Bytes(), err
}

func (r *Result) name() string {
	if r.ID != 0 {
		return fmt.Sprintf("job %d", r.ID)
	}
	return fmt.Sprintf("job (key %d)", r.Key)
}
