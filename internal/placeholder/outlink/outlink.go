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
// output is (where: "site s (host h)").
func Resolve(ctx context.Context, root, p string, job Job, prefix, where string) string {
	full, err := stage.Rooted(root, p)
	if err != nil {
		return "" // HashFile refuses it with the reason
	}
	fi, err := os.Lstat(full)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return ""
	}
	target, _ := os.Readlink(full)
	refuse := func(what string) string {
		return fmt.Sprintf("%s%s at %s is a symbolic link to %s, %s: mq stages what an output links to only in the job's directory or a regular file of yours",
			prefix, p, where, protocol.Quote(target), what)
	}
	src, err := openLinked(job, full, target)
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
	if err := replaceLink(ctx, root, p, src); err != nil {
		return fmt.Sprintf("%s%s at %s: copying what it links to: %v", prefix, p, where, err)
	}
	return ""
}

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
func openLinked(job Job, full, target string) (*os.File, error) {
	open := func(f *os.File, err error, own bool) (*os.File, error) {
		if err != nil {
			return nil, err
		}
		fi, err := f.Stat()
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
	if work, scratch := job(); work != "" {
		rel, err := filepath.Rel(work, full)
		if sc := scratch + string(filepath.Separator); scratch != "" && strings.HasPrefix(target, sc) {
			rel, err = filepath.Clean(strings.TrimPrefix(target, sc)), nil
		}
		if err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			if r, err := os.OpenRoot(work); err == nil {
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
// through an os.Root at the data root.
func replaceLink(ctx context.Context, root, p string, src *os.File) error {
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	rel := strings.TrimPrefix(filepath.Clean(p), "/")
	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".mq-link")
	r.Remove(tmp) // left by an agent killed while copying
	dst, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, io.LimitReader(ctxReader{ctx, src}, fi.Size()))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, rel)
	}
	if err != nil {
		r.Remove(tmp)
	}
	return err
}

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
