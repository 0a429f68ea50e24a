package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/mq-hpc/mq/internal/pathguard"
)

// Modes of what staging makes below a data root (Dir and SFTP with a
// Root): private, as jobs' output is. A umask can only take bits away.
const (
	dataDirMode  fs.FileMode = 0o700
	dataFileMode fs.FileMode = 0o600
)

// Dir is a Place on the local filesystem. Root "" or "/" is the identity:
// the CLS host's own files, where no symbolic link can lead anywhere but
// the CLS host, so links are followed as any program would. Any other Root
// maps P to Root+P, and every access goes through an os.Root opened at
// Root: symbolic links that stay below Root are followed, and ones that
// lead out of it (or are absolute) are refused by the kernel-backed walk
// os.Root does (openat with O_NOFOLLOW per component), which, unlike an
// Lstat walk, cannot be raced by swapping a directory for a link.
type Dir struct {
	Root string
	// Writer tags the temporary files, as SFTP.Writer does.
	Writer string
	// Umask, when set, is the user's umask for what the identity makes:
	// the CLS runs under umask 077, but the files it stages to its own
	// host are the user's, made as the user's other files are (0666 and
	// 0777 less it). Unset, the process's umask applies (an agent's is
	// the user's).
	Umask *fs.FileMode
}

// fsys is what Dir needs of a filesystem: *os.Root, or the host's.
type fsys interface {
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Stat(name string) (fs.FileInfo, error)
	MkdirAll(name string, perm fs.FileMode) error
	Rename(oldname, newname string) error
	Remove(name string) error
	Close() error
}

// host is the identity filesystem: names are absolute.
type host struct{}

func (host) OpenFile(n string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile("/"+n, flag, perm)
}
func (host) Stat(n string) (fs.FileInfo, error)        { return os.Stat("/" + n) }
func (host) MkdirAll(n string, perm fs.FileMode) error { return os.MkdirAll("/"+n, perm) }
func (host) Rename(o, n string) error                  { return os.Rename("/"+o, "/"+n) }
func (host) Remove(n string) error                     { return os.Remove("/" + n) }
func (host) Close() error                              { return nil }

func (d Dir) identity() bool { return d.Root == "" || path.Clean(d.Root) == "/" }

// open returns the filesystem of d and p's name within it; with create, a
// missing Root is made.
func (d Dir) open(p string, create bool) (fsys, string, error) {
	if _, err := Rooted(d.Root, p); err != nil {
		return nil, "", err
	}
	rel, _ := relative(p)
	if d.identity() {
		return host{}, rel, nil
	}
	r, err := os.OpenRoot(d.Root)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err = os.MkdirAll(d.Root, dataDirMode); err == nil {
			r, err = os.OpenRoot(d.Root)
		}
	}
	if err != nil {
		return nil, "", err
	}
	return r, rel, nil
}

// where names the directory p is in, for messages.
func (d Dir) where(p string) string {
	full, err := Rooted(d.Root, p)
	if err != nil {
		return d.Root
	}
	return path.Dir(full)
}

// refuse turns os.Root's escape errors into ErrPath.
func (d Dir) refuse(p string, err error) error {
	if err == nil {
		return nil
	}
	if isEscape(err) {
		return fmt.Errorf("%w: %s leads out of %s: %w", ErrPath, p, d.Root, err)
	}
	return err
}

// isEscape reports an os.Root refusal ("path escapes from parent", maybe
// inside other *PathErrors), which has no exported sentinel.
func isEscape(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// Files are not synced before the rename: a killed process or a cut
// connection cannot leave a partial file under the final name, which is
// what staging needs; a power loss may, and the catalog's checksums catch
// that when the file is next read.

// Open opens p for reading. A FIFO would block an open for reading, so
// the open does not wait, and anything but a regular file is refused.
func (d Dir) Open(ctx context.Context, p string) (io.ReadCloser, Info, error) {
	f, rel, err := d.open(p, false)
	if err != nil {
		return nil, Info{}, err
	}
	defer f.Close()
	file, err := f.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, Info{}, d.refuse(p, err)
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, Info{}, err
	}
	info := infoOf(fi)
	if !info.Regular {
		file.Close()
		return nil, Info{}, fmt.Errorf("%s: not a regular file", p)
	}
	// Hide *os.File's WriteTo/ReadFrom: the Mover picks the copy path.
	return reader{file}, info, nil
}

type reader struct{ f *os.File }

func (r reader) Read(b []byte) (int, error) { return r.f.Read(b) }
func (r reader) Close() error               { return r.f.Close() }

func infoOf(fi fs.FileInfo) Info {
	return Info{Size: fi.Size(), ModTime: fi.ModTime(), Regular: fi.Mode().IsRegular()}
}

// Stat describes p.
func (d Dir) Stat(ctx context.Context, p string) (Info, error) {
	f, rel, err := d.open(p, false)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	fi, err := f.Stat(rel)
	if err != nil {
		return Info{}, d.refuse(p, err)
	}
	return infoOf(fi), nil
}

// Remove removes p: on the CLS host's own files, in the directory
// reached as Create reaches it.
func (d Dir) Remove(ctx context.Context, p string) error {
	f, rel, err := d.open(p, false)
	if err != nil {
		return err
	}
	if d.identity() {
		r, err := pathguard.OpenRoot("/" + path.Dir(rel))
		if err != nil {
			return err
		}
		f, rel = r, path.Base(rel)
	}
	defer f.Close()
	return d.refuse(p, f.Remove(rel))
}

// Create makes p's directory as needed and a temporary file beside p.
func (d Dir) Create(ctx context.Context, p string) (Temp, error) {
	f, rel, err := d.open(p, true)
	if err != nil {
		return nil, err
	}
	// A data root's files are the user's alone, whatever the umask; the
	// CLS host's own files (the identity) follow the user's umask as any
	// file the user makes.
	dirMode, fileMode := fs.FileMode(0o777), fs.FileMode(0o666)
	if !d.identity() {
		dirMode, fileMode = dataDirMode, dataFileMode
	}
	if d.identity() {
		// The CLS host's own files: the directory is reached without
		// another user's links (pathguard) and the file made and renamed
		// in it by descriptor.
		if f, rel, err = d.hostDir(rel, dirMode); err != nil {
			return nil, dirNoSpace(err, d.where(p))
		}
	} else if dir := path.Dir(rel); dir != "." {
		if err := f.MkdirAll(dir, dirMode); err != nil {
			f.Close()
			return nil, dirNoSpace(d.refuse(p, err), d.where(p))
		}
	}
	tmp := path.Join(path.Dir(rel), tempName(path.Base(rel), d.Writer))
	file, err := f.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if errors.Is(err, fs.ErrExist) {
		// Left by an interrupted transfer: take it over.
		if err = f.Remove(tmp); err == nil || errors.Is(err, fs.ErrNotExist) {
			file, err = f.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
		}
	}
	if err != nil {
		f.Close()
		return nil, dirNoSpace(d.refuse(p, err), d.where(p))
	}
	if d.Umask != nil && d.identity() {
		file.Chmod(fileMode &^ *d.Umask) // at worst it stays as private as the process's umask made it
	}
	return &dirTemp{d: d, p: p, fs: f, file: file, tmp: tmp, rel: rel}, nil
}

type dirTemp struct {
	d        Dir
	p        string
	fs       fsys
	file     *os.File
	tmp, rel string
	finished bool
}

func (t *dirTemp) Write(b []byte) (int, error) {
	n, err := t.file.Write(b)
	return n, dirNoSpace(err, t.d.where(t.p))
}

func (t *dirTemp) Commit(ctx context.Context) error {
	if t.finished {
		return nil
	}
	err := dirNoSpace(t.file.Close(), t.d.where(t.p))
	if err == nil {
		err = t.d.refuse(t.p, t.fs.Rename(t.tmp, t.rel))
	}
	if err != nil {
		t.fs.Remove(t.tmp)
	}
	t.finished = true
	t.fs.Close()
	return err
}

func (t *dirTemp) Abort() error {
	if t.finished {
		return nil
	}
	t.finished = true
	t.file.Close()
	err := t.fs.Remove(t.tmp)
	t.fs.Close()
	return err
}

// hostDir makes the directory of rel (a name on the CLS host) with its
// missing parents, the user's umask applied to those it makes, and opens
// it as a Root (pathguard.OpenRoot): not through a link another user
// aimed, as their /tmp/results pointing at a directory of ours would
// have a staged output replace our file of its name there. It returns
// the Root and rel's name in it.
func (d Dir) hostDir(rel string, mode fs.FileMode) (fsys, string, error) {
	dir, err := pathguard.Resolve("/" + path.Dir(rel))
	if err != nil {
		return nil, "", err
	}
	made := d.toMake(host{}, dir)
	if err := os.MkdirAll(dir, mode); err != nil {
		return nil, "", err
	}
	d.userMode(made, mode)
	r, err := pathguard.OpenRoot(dir)
	if err != nil {
		return nil, "", err
	}
	return r, path.Base(rel), nil
}

// toMake lists the directories of dir (a name in f) that do not exist
// yet, the deepest last, when the identity makes them with the user's
// umask (Umask set); else none.
func (d Dir) toMake(f fsys, dir string) []string {
	if d.Umask == nil || !d.identity() {
		return nil
	}
	var made []string
	for ; dir != "." && dir != "/" && dir != ""; dir = path.Dir(dir) {
		if _, err := f.Stat(dir); err == nil {
			break
		}
		made = append([]string{dir}, made...)
	}
	return made
}

// userMode gives the directories made (names in the identity) mode less
// the user's umask. Each is opened without following a link and changed
// through its descriptor: in a directory others may write (/tmp) one of
// them could have been replaced by a link since, and chmod by name would
// change where it points. At worst a directory stays as private as the
// process's umask made it.
func (d Dir) userMode(made []string, mode fs.FileMode) {
	for _, m := range made {
		f, err := os.OpenFile("/"+m, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if fi, err := f.Stat(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Getuid() {
				f.Chmod(mode &^ *d.Umask)
			}
		}
		f.Close()
	}
}
