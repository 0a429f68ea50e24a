// Package outlink resolves outputs that are symbolic links. Tools often
// link their results (out.dat -> run-3/result.dat) rather than write
// them; a data root's
// files are staged over SFTP, where no link is followed. So, below a data
// root, after the command, a declared output that is a link is replaced
// by a copy of what it points to, when that is a regular file in the
// job's directory or a regular file the user owns (the job, run as the
// user, could have copied it itself); any other link (to a device,
// a directory, another user's file, nothing) fails the attempt with a
// reason naming it. The copy is written beside the link and renamed over
// it through the data root's os.Root, so no link makes the agent write
// outside the root; the CLS never follows a link in a data root at all
// (stage.SFTP). Without a data root the files are the user's own on the
// CLS host's filesystem and are read as any program would, links and all.
//
// The link, its target and the copy may lie on a filesystem whose server
// is gone (NFS, Lustre), where a call blocks for ever: a resolve is given
// up once a deadline passes without one of its calls returning
// (hung.Progressing), so the copy of a big file is not cut, one call that
// hangs is.
package outlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/hung"
	"github.com/mq-hpc/mq/internal/stage"
	"github.com/mq-hpc/mq/protocol"
)

// Job says where an output's link may lead: the job's directory (work;
// "" when it has none), and the scratch directory its attempt ran in
// ("" when none). It is asked only for an output that is a link.
type Job func() (work, scratch string)

// Resolve replaces the output p, if it is a symbolic link below the data
// root, by a copy of its target; it says why it cannot ("" when p is no
// link, or was replaced), starting with prefix and naming where the
// output is (where: "site s (host h)"). It gives up once wait passes
// without one of its filesystem calls returning, saying so; the calls
// left blocked go no further once they return, and close what they
// opened.
func Resolve(ctx context.Context, root, p string, job Job, wait time.Duration, prefix, where string) string {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a resolve given up on stops at its next call
	var why string
	err := hung.Progressing(wait, "a filesystem call resolving the link", func(step func()) error {
		why = resolve(ctx, root, p, job, step, prefix, where)
		return nil
	})
	if err != nil {
		return fmt.Sprintf("%s%s at %s: %v", prefix, p, where, err)
	}
	return why
}

// resolve is Resolve, calling step as each filesystem call returns.
func resolve(ctx context.Context, root, p string, job Job, step func(), prefix, where string) string {
	full, err := stage.Rooted(root, p)
	if err != nil {
		return "" // HashFile refuses it with the reason
	}
	fi, err := os.Lstat(full)
	step()
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return ""
	}
	target, _ := os.Readlink(full)
	step()
	refuse := func(what string) string {
		return fmt.Sprintf("%s%s at %s is a symbolic link to %s, %s: mq stages what an output links to only in the job's directory or a regular file of yours",
			prefix, p, where, protocol.Quote(target), what)
	}
	src, err := openLinked(job, full, target, step)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return refuse("which does not exist")
	case errors.Is(err, errNotRegular):
		return refuse("not a regular file")
	case errors.Is(err, errNotOwn):
		return refuse("out of the job's directory and not yours")
	case err != nil:
		return refuse(err.Error())
	}
	defer src.Close()
	if err := replaceLink(ctx, root, p, src, step); err != nil {
		return fmt.Sprintf("%s%s at %s: copying what it links to: %v", prefix, p, where, err)
	}
	return ""
}

// Seams for tests, which fake a filesystem that hangs or is slow.
var (
	// opened is called with the linked file as its open returns.
	opened = func(*os.File) {}
	// reader is what the copy reads the linked file through.
	reader = func(f *os.File) io.Reader { return f }
)

var (
	errNotRegular = errors.New("not a regular file")
	errNotOwn     = errors.New("not the user's")
)

// openLinked opens what the link full (to target) points to: through an
// os.Root at the job's directory when it leads there (any regular file),
// else as the user (a regular file the user owns). A FIFO is not waited
// for. An absolute link into the attempt's scratch directory (a copy of
// a replicated job, whose $PWD that was) is read where the scratch
// directory's files were moved when the attempt won: the job's directory.
// step is called as each filesystem call returns.
func openLinked(job Job, full, target string, step func()) (*os.File, error) {
	open := func(f *os.File, err error, own bool) (*os.File, error) {
		if err != nil {
			return nil, err
		}
		opened(f)
		step()
		fi, err := f.Stat()
		step()
		switch {
		case err != nil:
		case !fi.Mode().IsRegular():
			err = errNotRegular
		case own && !ownedByMe(fi):
			err = errNotOwn
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	const flags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
	work, scratch := job()
	step()
	if work != "" {
		rel, err := filepath.Rel(work, full)
		if sc := scratch + string(filepath.Separator); scratch != "" && strings.HasPrefix(target, sc) {
			rel, err = filepath.Clean(strings.TrimPrefix(target, sc)), nil
		}
		if err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			if r, err := os.OpenRoot(work); err == nil {
				step()
				f, err := r.OpenFile(rel, flags, 0)
				r.Close()
				if err == nil || !isRootEscape(err) {
					return open(f, err, false)
				}
			}
		}
	}
	f, err := os.OpenFile(full, flags, 0)
	return open(f, err, true)
}

// isRootEscape says err is os.Root's refusal of a path leading out of it.
func isRootEscape(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// replaceLink writes src's bytes (as many as it had when opened) to a
// temporary file beside the output p and renames it over the link, all
// through an os.Root at the data root, unless ctx ends first. step is
// called as each filesystem call returns, each read of the copy among
// them: a write that hangs holds the next read.
func replaceLink(ctx context.Context, root, p string, src *os.File, step func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fi, err := src.Stat()
	step()
	if err != nil {
		return err
	}
	r, err := os.OpenRoot(root)
	step()
	if err != nil {
		return err
	}
	defer r.Close()
	rel := strings.TrimPrefix(filepath.Clean(p), "/")
	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".mq-link")
	r.Remove(tmp) // left by an agent killed while copying
	step()
	dst, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	step()
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, io.LimitReader(ctxReader{ctx, reader(src), step}, fi.Size()))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	step()
	if err == nil {
		err = ctx.Err() // given up on: the link stays
	}
	if err == nil {
		err = r.Rename(tmp, rel)
	}
	if err != nil {
		r.Remove(tmp)
	}
	return err
}

// ctxReader stops reading once ctx ends, and calls step as each read
// returns.
type ctxReader struct {
	ctx  context.Context
	r    io.Reader
	step func()
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(b)
	c.step()
	return n, err
}
