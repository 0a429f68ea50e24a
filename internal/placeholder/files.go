package placeholder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"

	"github.com/mq-hpc/mq/internal/stage"
	"github.com/mq-hpc/mq/protocol"
)

// Files over the agent's own connection (DESIGN.md, "Data staging"). An
// agent with a data root asks the CLS for file orders (files.poll, a long
// poll) and carries them out in its data root: a get writes a file whose
// bytes it pulls chunk by chunk (files.pull), to a temporary name that
// takes the file's name only when the SHA-256 of what arrived equals the
// CLS's; a put sends a file chunk by chunk (files.push); a remove removes
// one. Each order ends with files.done. At most filesAtOnce orders run at
// once; each has one chunk in flight, so an agent holds at most
// filesAtOnce chunks of MaxFileChunk.

const (
	filesAtOnce = 4
	filePollMS  = 20_000
)

// serveFiles polls for file orders until ctx ends. A CLS that does not
// serve them (an older one) is asked again only after a while.
func (a *Agent) serveFiles(ctx context.Context) {
	sem := make(chan struct{}, filesAtOnce)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		var o protocol.FileOrder
		err := call(ctx, a, protocol.OpFilesPoll, func(id int64) protocol.FilePoll {
			return protocol.FilePoll{Placeholder: id, WaitMS: filePollMS}
		}, &o)
		if err != nil || o.Xfer == 0 {
			<-sem
			if err != nil && ctx.Err() == nil {
				var pe *protocol.Error
				wait := time.Second
				if errors.As(err, &pe) && pe.Code == protocol.CodeUnsupported {
					wait = time.Minute
				}
				select {
				case <-time.After(wait):
				case <-ctx.Done():
				}
			}
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			a.fileOrder(ctx, o)
		})
	}
}

// fileOrder carries out one order and reports its end.
func (a *Agent) fileOrder(ctx context.Context, o protocol.FileOrder) {
	done := protocol.FileDone{Xfer: o.Xfer}
	var err error
	switch o.Kind {
	case protocol.FileGet:
		done.Size, done.SHA256, err = a.getFile(ctx, o)
	case protocol.FilePut:
		done.Size, done.SHA256, err = a.putFile(ctx, o)
	case protocol.FileRemove:
		err = a.place(false).Remove(ctx, o.Path)
	default:
		err = fmt.Errorf("unknown file order %q", protocol.ClipText(o.Kind, 32))
	}
	if err != nil {
		done.Error = protocol.ClipText(err.Error(), protocol.MaxReasonBytes)
		done.Missing = errors.Is(err, fs.ErrNotExist)
		done.NoSpace = errors.Is(err, stage.ErrNoSpace)
		a.log.Warn("file transfer failed", "kind", o.Kind, "path", o.Path, "err", err)
	}
	if ctx.Err() != nil {
		return
	}
	if err := call(ctx, a, protocol.OpFilesDone, func(id int64) protocol.FileDone {
		done.Placeholder = id
		return done
	}, nil); err != nil && ctx.Err() == nil {
		a.log.Warn("cannot end a file transfer", "path", o.Path, "err", err)
	}
}

// getFile writes o.Path from the chunks the CLS sends; it takes its name
// only when the bytes' SHA-256 is the CLS's.
func (a *Agent) getFile(ctx context.Context, o protocol.FileOrder) (int64, string, error) {
	tmp, err := a.place(false).Create(ctx, o.Path)
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	var off int64
	for {
		var d protocol.FileData
		if err := call(ctx, a, protocol.OpFilesPull, func(id int64) protocol.FilePull {
			return protocol.FilePull{Placeholder: id, Xfer: o.Xfer, Offset: off}
		}, &d); err != nil {
			tmp.Abort()
			return off, "", err
		}
		if _, err := tmp.Write(d.Data); err != nil {
			tmp.Abort()
			return off, "", err
		}
		h.Write(d.Data)
		off += int64(len(d.Data))
		if !d.EOF {
			continue
		}
		sum := hex.EncodeToString(h.Sum(nil))
		if sum != d.SHA256 {
			tmp.Abort()
			return off, sum, fmt.Errorf("%s: SHA-256 %s of the %d bytes received, the CLS sent %s", o.Path, sum, off, protocol.ClipText(d.SHA256, 64))
		}
		if err := tmp.Commit(ctx); err != nil {
			return off, sum, err
		}
		return off, sum, nil
	}
}

// putFile sends o.Path to the CLS in chunks.
func (a *Agent) putFile(ctx context.Context, o protocol.FileOrder) (int64, string, error) {
	r, info, err := a.place(false).Open(ctx, o.Path)
	if err != nil {
		return 0, "", err
	}
	defer r.Close()
	h := sha256.New()
	buf := make([]byte, protocol.MaxFileChunk)
	var off int64
	for {
		n, rerr := io.ReadFull(r, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return off, "", rerr
		}
		eof := rerr != nil || off+int64(n) >= info.Size
		h.Write(buf[:n])
		c := protocol.FileChunk{Xfer: o.Xfer, Offset: off, Size: info.Size, Data: buf[:n], EOF: eof}
		if err := call(ctx, a, protocol.OpFilesPush, func(id int64) protocol.FileChunk {
			c.Placeholder = id
			return c
		}, nil); err != nil {
			return off, "", err
		}
		off += int64(n)
		if eof {
			return off, hex.EncodeToString(h.Sum(nil)), nil
		}
	}
}
