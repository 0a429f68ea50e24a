package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
)

// SFTP is a Place on a site's login host, reached over SFTP. Root is the
// data root: absolute, or relative to the login directory (the SFTP
// server's working directory, normally the home); "" or "/" is the
// identity, for a site that shares the CLS host's filesystem.
//
// Below a non-identity Root, no component of a path may be a symbolic
// link: each is checked with Lstat (all of a path's components at once,
// pipelined on the connection) before the file is opened, created or
// removed. SFTP has no openat, so this check can be raced by someone
// who can write inside the data root while a transfer runs; the data root
// belongs to the user, so that someone is the user.
//
// For throughput close to OpenSSH's sftp, the Client should be made with
// concurrent reads (pkg/sftp's default) and UseConcurrentWrites(true):
// the Mover then keeps up to MaxConcurrentRequestsPerFile (default 64)
// requests of MaxPacket (default 32 KiB) in flight per file, as OpenSSH
// does.
type SFTP struct {
	Client *sftp.Client
	Root   string
	// Writer names who writes through this Place (a site's name): it
	// tags the temporary files (see TempSuffix), so that a leftover is
	// taken over only by the writer that left it.
	Writer string
	// Drop, if set, ends Client's session at once, failing every
	// request waiting on it: Cut calls it. It reports whether it cut
	// the connection under the session (the site's SSH connection),
	// else only the session's channel was ended. Unset, Cut closes
	// Client.
	Drop func() (conn bool)
	// Stall bounds the calls made outside a transfer (Stat, Remove,
	// CheckRoot, Sweep, HashFile): one left unanswered this long cuts
	// the place and fails with ErrStalled. DefaultStall when 0.
	Stall time.Duration
}

var _ Cutter = SFTP{}

// Cut ends the place's session, for a transfer that stalled
// (Mover.Stall), and reports whether its connection was cut too (Drop).
// Closing Client alone waits for a request being written to a peer that
// stopped reading: Drop is what ends that.
func (s SFTP) Cut() bool {
	if s.Drop != nil {
		return s.Drop()
	}
	go s.Client.Close()
	return false
}

func (s SFTP) identity() bool { return s.Root == "" || path.Clean(s.Root) == "/" }

// components returns the full paths of p's directories below the root and
// of p itself.
func (s SFTP) components(p string) ([]string, error) {
	full, err := Rooted(s.Root, p)
	if err != nil {
		return nil, err
	}
	rel, _ := relative(p)
	base := strings.TrimSuffix(full, rel)
	elems := strings.Split(rel, "/")
	out := make([]string, len(elems))
	for i := range elems {
		out[i] = base + strings.Join(elems[:i+1], "/")
	}
	return out, nil
}

type lstatResult struct {
	fi  os.FileInfo
	err error
}

// lstatAll Lstats paths concurrently: one round trip, not one per name.
func (s SFTP) lstatAll(paths []string) []lstatResult {
	res := make([]lstatResult, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() {
			fi, err := s.Client.Lstat(p)
			res[i] = lstatResult{fi, err}
		})
	}
	wg.Wait()
	return res
}

// check walks p's components: a symbolic link anywhere below the root is
// refused, a missing directory is made when mkdir is set, else it is an
// error. It returns p's full path and what Lstat saw there (nil, nil when
// p does not exist).
func (s SFTP) check(p string, mkdir bool) (string, os.FileInfo, error) {
	comps, err := s.components(p)
	if err != nil {
		return "", nil, err
	}
	full := comps[len(comps)-1]
	if s.identity() {
		if mkdir {
			if err := s.Client.MkdirAll(path.Dir(full)); err != nil {
				return "", nil, fmt.Errorf("mkdir %s: %w", path.Dir(full), err)
			}
		}
		fi, err := s.Client.Stat(full)
		if errors.Is(err, fs.ErrNotExist) {
			return full, nil, nil
		}
		return full, fi, err
	}
	res := s.lstatAll(comps)
	for i, c := range comps {
		fi, err := res[i].fi, res[i].err
		last := i == len(comps)-1
		switch {
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			return "", nil, fmt.Errorf("%w: %s: %s is a symbolic link below the data root %s", ErrPath, p, c, s.Root)
		case err == nil && last:
			return full, fi, nil
		case err == nil && !fi.IsDir():
			return "", nil, fmt.Errorf("%s: %s is not a directory", p, c)
		case err == nil:
		case !errors.Is(err, fs.ErrNotExist):
			return "", nil, fmt.Errorf("lstat %s: %w", c, err)
		case last:
			return full, nil, nil
		case !mkdir:
			return "", nil, fmt.Errorf("%s: %w", c, fs.ErrNotExist)
		default:
			if err := s.mkdir(c, i == 0); err != nil {
				return "", nil, err
			}
		}
	}
	panic("unreachable")
}

// mkdir makes dir, and the root above it first if needed; one made by a
// concurrent transfer meanwhile is fine if it is a directory.
func (s SFTP) mkdir(dir string, first bool) error {
	err := s.Client.Mkdir(dir)
	if err != nil && first {
		// The data root itself is missing: made private too. Or it was,
		// and a concurrent transfer made it since this mkdir failed.
		root := path.Dir(dir)
		_, lerr := s.Client.Lstat(root)
		there := lerr == nil
		if errors.Is(lerr, fs.ErrNotExist) {
			there = s.Client.MkdirAll(root) == nil && s.Client.Chmod(root, dataDirMode) == nil
		}
		if there {
			err = s.Client.Mkdir(dir)
		}
	}
	if err == nil {
		// SFTP's mkdir takes the server's umask; what is below a data
		// root is the user's alone.
		return s.Client.Chmod(dir, dataDirMode)
	}
	fi, lerr := s.Client.Lstat(dir)
	if lerr != nil || !fi.IsDir() {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	return nil
}

// Open opens p for reading. The *sftp.File returned is an io.WriterTo
// that reads with concurrent requests.
func (s SFTP) Open(ctx context.Context, p string) (io.ReadCloser, Info, error) {
	full, fi, err := s.check(p, false)
	if err != nil {
		return nil, Info{}, err
	}
	if fi == nil {
		return nil, Info{}, fmt.Errorf("%s: %w", full, fs.ErrNotExist)
	}
	info := infoOf(fi)
	if !info.Regular {
		return nil, Info{}, fmt.Errorf("%s: not a regular file", p)
	}
	f, err := s.Client.Open(full)
	if err != nil {
		return nil, Info{}, err
	}
	return f, info, nil
}

// Stat describes p.
func (s SFTP) Stat(ctx context.Context, p string) (Info, error) {
	var info Info
	err := s.watched(ctx, "stat "+p, func(context.Context, func()) error {
		full, fi, err := s.check(p, false)
		if err != nil {
			return err
		}
		if fi == nil {
			return fmt.Errorf("%s: %w", full, fs.ErrNotExist)
		}
		info = infoOf(fi)
		return nil
	})
	return info, err
}

// Remove removes p.
func (s SFTP) Remove(ctx context.Context, p string) error {
	return s.watched(ctx, "remove "+p, func(context.Context, func()) error {
		full, fi, err := s.check(p, false)
		if err != nil {
			return err
		}
		if fi == nil {
			return fmt.Errorf("%s: %w", full, fs.ErrNotExist)
		}
		return s.Client.Remove(full)
	})
}

// Create makes p's directories as needed and a temporary file beside p.
// Below a data root the file is made in a directory of its own beside p
// (privateTemp), the temporary name, private before the file is in it.
func (s SFTP) Create(ctx context.Context, p string) (Temp, error) {
	full, _, err := s.check(p, true)
	if err != nil {
		if f, rerr := Rooted(s.Root, p); rerr == nil {
			err = s.noSpace(err, path.Dir(f)) // a directory not made for want of room
		}
		return nil, err
	}
	tmp := path.Join(path.Dir(full), tempName(path.Base(full), s.Writer))
	t := &sftpTemp{s: s, tmp: tmp, full: full}
	if !s.identity() {
		if err := s.privateTemp(tmp); err != nil {
			return nil, fmt.Errorf("create %s: %w", tmp, s.noSpace(err, path.Dir(full)))
		}
		t.dir, t.tmp = tmp, path.Join(tmp, path.Base(full))
	}
	f, err := s.Client.OpenFile(t.tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil && s.identity() {
		// Perhaps left by an interrupted transfer (SFTP v3 does not say
		// why an exclusive open failed): take it over if so.
		if _, lerr := s.Client.Lstat(t.tmp); lerr == nil && s.Client.Remove(t.tmp) == nil {
			f, err = s.Client.OpenFile(t.tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		}
	}
	if err != nil {
		t.removeDir()
		return nil, fmt.Errorf("create %s: %w", t.tmp, s.noSpace(err, path.Dir(full)))
	}
	t.f = f
	if !s.identity() {
		// Before any byte is written: the file is private as a Dir's.
		if err := f.Chmod(dataFileMode); err != nil {
			t.Abort()
			return nil, fmt.Errorf("chmod %s: %w", t.tmp, err)
		}
	}
	return t, nil
}

// privateTemp makes dir, the directory a temporary file is made in,
// private (0700) and checked so before anything is in it. SFTP's open
// (as pkg/sftp sends it) carries no mode: a file made beside its target
// exists under the login host's umask until its chmod, and another user
// who can search that directory (a data root others may read, a
// directory a job made) can open it in that moment and read the input
// through the descriptor as it is written. In a directory they may not
// search they cannot look its name up. What an interrupted transfer left
// there (such a directory, or a temporary file as older versions made it)
// is taken over.
func (s SFTP) privateTemp(dir string) error {
	err := s.Client.Mkdir(dir)
	if err != nil {
		if _, lerr := s.Client.Lstat(dir); lerr == nil && s.removeTemp(dir) == nil {
			err = s.Client.Mkdir(dir)
		}
	}
	if err == nil {
		err = s.Client.Chmod(dir, dataDirMode)
	}
	if err != nil {
		return err
	}
	fi, err := s.Client.Lstat(dir)
	if err == nil && (!fi.IsDir() || fi.Mode().Perm()&0o077 != 0) {
		err = fmt.Errorf("%s is %v after chmod 700: it cannot be made private", dir, fi.Mode())
	}
	if err != nil {
		s.Client.RemoveDirectory(dir)
	}
	return err
}

// removeTemp removes p, a temporary name of this writer's: a file, or a
// directory (privateTemp) with the file in it.
func (s SFTP) removeTemp(p string) error {
	fi, err := s.Client.Lstat(p)
	if err != nil || !fi.IsDir() {
		return s.Client.Remove(p)
	}
	ents, err := s.Client.ReadDir(p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Mode().IsRegular() {
			s.Client.Remove(path.Join(p, e.Name()))
		}
	}
	return s.Client.RemoveDirectory(p)
}

type sftpTemp struct {
	s         SFTP
	f         *sftp.File
	tmp, full string
	dir       string // the private directory tmp is in (privateTemp); "" beside full
	finished  bool
}

// removeDir removes the temporary file's private directory, if it has one.
func (t *sftpTemp) removeDir() {
	if t.dir != "" {
		t.s.Client.RemoveDirectory(t.dir)
	}
}

func (t *sftpTemp) Write(b []byte) (int, error) {
	n, err := t.f.Write(b)
	return n, t.s.noSpace(err, path.Dir(t.full))
}

// ReadFrom writes r with concurrent write requests in flight; r is read in
// order, by one goroutine. An *io.LimitedReader tells the size, so that a
// small file takes as many requests (and goroutines) as it needs, not the
// client's maximum.
func (t *sftpTemp) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	var err error
	if _, ok := r.(*io.LimitedReader); ok {
		n, err = t.f.ReadFrom(r)
	} else {
		n, err = t.f.ReadFromWithConcurrency(r, 0)
	}
	return n, t.s.noSpace(err, path.Dir(t.full))
}

func (t *sftpTemp) Commit(ctx context.Context) error {
	if t.finished {
		return nil
	}
	t.finished = true
	err := t.f.Close()
	if err == nil {
		// posix-rename@openssh.com replaces atomically; plain SFTP rename
		// refuses an existing target.
		if err = t.s.Client.PosixRename(t.tmp, t.full); err != nil {
			if t.s.Client.Rename(t.tmp, t.full) == nil {
				err = nil
			}
		}
	}
	if err != nil {
		err = t.s.noSpace(err, path.Dir(t.full)) // before the file's room is freed
		t.s.Client.Remove(t.tmp)
		t.removeDir()
		return fmt.Errorf("commit %s: %w", t.full, err)
	}
	t.removeDir()
	return nil
}

func (t *sftpTemp) Abort() error {
	if t.finished {
		return nil
	}
	t.finished = true
	t.f.Close()
	err := t.s.Client.Remove(t.tmp)
	t.removeDir()
	return err
}

// maxSweep bounds the entries Sweep looks at: a data root is the CLS's,
// but a user may point it at a big tree.
const maxSweep = 200_000

// Sweep removes, below the data root, the temporary files this writer
// (s.Writer) left: what transfers interrupted by a killed CLS left
// half-written. Call it only while no transfer of this writer runs
// there (the CLS calls it before its first transfer to the site in a
// run): it cannot tell a leftover from a file being written. It returns
// how many it removed; it gives up quietly past maxSweep entries. A
// data root that does not exist yet has nothing to sweep.
func (s SFTP) Sweep(ctx context.Context) (int, error) {
	if s.identity() {
		return 0, nil // the CLS host's files: never swept
	}
	var n int
	err := s.watched(ctx, "sweeping the data root "+s.Root, func(ctx context.Context, progress func()) (err error) {
		n, err = s.sweep(ctx, progress)
		return err
	})
	return n, err
}

func (s SFTP) sweep(ctx context.Context, progress func()) (int, error) {
	root := s.Root
	if !path.IsAbs(root) {
		wd, err := s.Client.Getwd()
		if err != nil {
			return 0, err
		}
		root = path.Join(wd, root)
	}
	suffix := tempName("", s.Writer)[1:] // ".mq-part[-TAG]"
	removed, seen := 0, 0
	w := s.Client.Walk(root)
	for w.Step() {
		progress() // a big tree takes long, answered
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if seen++; seen > maxSweep {
			break
		}
		if err := w.Err(); err != nil {
			if errors.Is(err, fs.ErrNotExist) && w.Path() == root {
				return 0, nil
			}
			continue
		}
		fi := w.Stat()
		name := path.Base(w.Path())
		// Walk does not follow links; only regular files of ours go,
		// and our private directories (privateTemp) with what is in them.
		if !fi.Mode().IsRegular() && !fi.IsDir() || !strings.HasPrefix(name, ".") || !strings.HasSuffix(name, suffix) {
			continue
		}
		if fi.IsDir() {
			w.SkipDir()
		}
		if err := s.removeTemp(w.Path()); err == nil {
			removed++
		}
	}
	return removed, nil
}

// CheckRoot checks the data root on the login host as the agent checks
// its own (mqhome.CheckPrivate), since the CLS writes staged inputs there:
// whoever else could write it, or rename it away, could swap an input
// for bytes of their own before a job reads it. The root, if it exists,
// must be a directory owned by the login user (the owner of the login
// directory) and not writable by group or others; every directory above
// it owned by root or that user and not writable by others unless
// sticky. A missing root is fine: staging makes it, mode 0700.
func (s SFTP) CheckRoot(ctx context.Context) error {
	if s.identity() {
		return nil
	}
	return s.watched(ctx, "checking the data root "+s.Root, func(ctx context.Context, _ func()) error {
		return s.checkRoot(ctx)
	})
}

func (s SFTP) checkRoot(ctx context.Context) error {
	wd, err := s.Client.Getwd()
	if err != nil {
		return err
	}
	root := s.Root
	if !path.IsAbs(root) {
		root = path.Join(wd, root)
	}
	home, err := s.Client.Stat(wd)
	if err != nil {
		return err
	}
	me, ok := sftpUID(home)
	if !ok {
		return nil // the server tells no owners: nothing to compare
	}
	// A link another user owns (made first in a sticky /scratch, say)
	// passes the checks below while it points at a directory of the
	// user's; its owner could point it elsewhere later.
	if li, err := s.Client.Lstat(root); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		if uid, _ := sftpUID(li); uid != 0 && uid != me {
			return unsafeRoot("data root %s is a symbolic link owned by uid %d (not the login user or root): they could point it at another directory; give the site a data root of its own", root, uid)
		}
	}
	fi, err := s.Client.Stat(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data root %s: %w", root, err)
	}
	if !fi.IsDir() {
		return unsafeRoot("data root %s is not a directory", root)
	}
	if uid, _ := sftpUID(fi); uid != me {
		return unsafeRoot("data root %s is owned by uid %d, not by the login user (uid %d): they could replace staged inputs; give the site a data root of its own (cls site add --data-root)", root, uid, me)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return unsafeRoot("data root %s is writable by others (mode %04o): they could replace staged inputs; chmod 700 %s on the login host", root, uint32(fi.Mode().Perm()), root)
	}
	if err := s.checkAbove(ctx, root, root, me); err != nil {
		return err
	}
	// Through links of the user's, the directory lies elsewhere: what is
	// above it there could rename it away too.
	real, err := s.resolve(root)
	if err != nil {
		return fmt.Errorf("data root %s: %w", root, err)
	}
	if real != root {
		return s.checkAbove(ctx, root, real, me)
	}
	return nil
}

// checkAbove checks the directories above dir, the data root root or
// where it lies: each owned by root or the login user (me), and not
// writable by others unless sticky.
func (s SFTP) checkAbove(ctx context.Context, root, dir string, me int) error {
	for d := path.Dir(dir); ; d = path.Dir(d) {
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := s.Client.Lstat(d)
		if err != nil {
			return fmt.Errorf("data root %s: %w", root, err)
		}
		if uid, _ := sftpUID(fi); uid != 0 && uid != me {
			return unsafeRoot("data root %s is inside %s, owned by uid %d (not the login user or root): they could replace it; give the site a data root of its own", root, d, uid)
		}
		// A link's own mode (0777) means nothing; where it leads is
		// checked on the real path.
		if fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return unsafeRoot("data root %s is inside %s, writable by others and not sticky (mode %04o): they could replace it; give the site a data root of its own", root, d, uint32(fi.Mode().Perm()))
		}
		if d == path.Dir(d) {
			return nil
		}
	}
}

// resolve is p with every symbolic link on it followed, as realpath(3)
// gives it: SFTP's realpath request does not follow links on every
// server (pkg/sftp's only cleans the path).
func (s SFTP) resolve(p string) (string, error) {
	rest := strings.Split(path.Clean(p), "/")
	cur, hops := "/", 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		fi, err := s.Client.Lstat(next)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		to, err := s.Client.ReadLink(next)
		if err != nil {
			return "", err
		}
		if path.IsAbs(to) {
			cur = "/"
		}
		rest = append(strings.Split(to, "/"), rest...)
	}
	return cur, nil
}

func sftpUID(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*sftp.FileStat)
	if !ok {
		return 0, false
	}
	return int(st.UID), true
}

// UnsafeRootError is CheckRoot's refusal of a data root that others could
// write: what it says is the reason and the mend. Any other error of
// CheckRoot is the connection's or the server's.
type UnsafeRootError struct{ Reason string }

func (e *UnsafeRootError) Error() string { return e.Reason }

func unsafeRoot(format string, args ...any) error {
	return &UnsafeRootError{Reason: fmt.Sprintf(format, args...)}
}
