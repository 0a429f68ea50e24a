// Package scratch keeps apart the attempts of a job that may run as
// several attempts at once (Assignment.Scratch: job replication). The
// command runs in
// WORKDIR/.mq-copies/ID.ATTEMPT, which holds a symbolic link to every
// entry of WORKDIR except the ones its declared outputs are made in: those
// directories are made afresh in the scratch directory (and filled with
// links the same way, down to the outputs), so the outputs and whatever
// new file the command makes land in the scratch directory, while it
// reads its inputs, and anything else of WORKDIR, through the links.
// After exit 0 the agent claims the win (Heartbeat.Claim); only a winner
// moves what the command made into WORKDIR, each file with one rename
// (atomic: a reader sees the old file or the whole new one). A loser, and
// a killed copy, only removes its scratch directory, so it never
// overwrites a winner's file.
package scratch

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mq-hpc/mq/internal/pathguard"
)

// Root is the directory, under a job's working directory, that holds its
// attempts' scratch directories.
const Root = ".mq-copies"

// Dir is one attempt's scratch directory.
type Dir struct {
	work, dir string
	// made are the directories made in dir on the way to outputs (paths
	// relative to dir): they exist in work too, or are made there.
	made   map[string]bool
	linked map[string]bool // the links the mirror made (relative to dir)
}

// Path is the scratch directory of attempt of job id under work.
func Path(work string, id int64, attempt int) string {
	return filepath.Join(work, Root, strconv.FormatInt(id, 10)+"."+strconv.Itoa(attempt))
}

// Make makes the scratch directory dir (Path) under work, for a command
// whose declared outputs are outs (relative to work).
func Make(work, dir string, outs []string) (*Dir, error) {
	s := &Dir{work: work, dir: dir, made: map[string]bool{}, linked: map[string]bool{}}
	if err := ownRoot(filepath.Join(work, Root)); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(s.dir); err != nil { // a leftover of a killed agent
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	if err := s.mirror("", outs); err != nil {
		s.Remove()
		return nil, err
	}
	return s, nil
}

// Path is where the command runs.
func (s *Dir) Path() string { return s.dir }

// ownRoot makes WORKDIR/.mq-copies if missing and checks that it
// is a directory of ours: in a working directory others may write (/tmp,
// a sticky /scratch) another user could have put a link there to a
// directory of theirs, where they could swap an attempt's files for
// their own before the winner moves them into place.
func ownRoot(p string) error {
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("scratch directory: %w", err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("scratch directory: %w", err)
	}
	if !fi.IsDir() || ownerOf(fi) != os.Geteuid() {
		return fmt.Errorf("scratch directory %s is not a directory of yours (%v, uid %d): another user could swap the attempts' files; remove it", p, fi.Mode().Type(), ownerOf(fi))
	}
	return nil
}

// mirror fills the scratch directory's rel (relative to dir and work)
// with links to work's entries there, except the outputs and the
// directories leading to them.
func (s *Dir) mirror(rel string, outs []string) error {
	skip := map[string]bool{} // names here that are outputs or lead to one
	sub := map[string]bool{}  // names here that are directories leading to outputs
	for _, o := range outs {
		r := o
		if rel != "" {
			if !strings.HasPrefix(o, rel+string(filepath.Separator)) {
				continue
			}
			r = strings.TrimPrefix(o, rel+string(filepath.Separator))
		}
		first, rest, deeper := strings.Cut(r, string(filepath.Separator))
		skip[first] = true
		if deeper && rest != "" {
			sub[first] = true
		}
	}
	entries, err := os.ReadDir(filepath.Join(s.work, rel))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("scratch directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if skip[name] || (rel == "" && name == Root) {
			continue
		}
		if err := os.Symlink(filepath.Join(s.work, rel, name), filepath.Join(s.dir, rel, name)); err != nil {
			return fmt.Errorf("scratch directory: %w", err)
		}
		s.linked[filepath.Join(rel, name)] = true
	}
	for _, name := range slices.Sorted(maps.Keys(sub)) {
		r := filepath.Join(rel, name)
		if err := os.Mkdir(filepath.Join(s.dir, r), 0o700); err != nil {
			return fmt.Errorf("scratch directory: %w", err)
		}
		s.made[r] = true
		if err := s.mirror(r, outs); err != nil {
			return err
		}
	}
	return nil
}

// Commit moves what the command made in the scratch directory into the
// working directory: every entry that is not one of the links, each file
// with one rename; the directories made on the way to outputs are
// walked into. Each directory of the working directory is opened as
// pathguard opens it, and entries renamed and made by its descriptor:
// in a working directory others may write (/tmp), another user's link
// at out/ to a directory of ours would otherwise have the winner's
// out/res replace our file of that name there.
func (s *Dir) Commit(step func()) error { return s.commitDir("", step) }

// commitDir is commit of rel; step is called as each filesystem call
// returns (Agent.keepWithin).
func (s *Dir) commitDir(rel string, step func()) error {
	entries, err := os.ReadDir(filepath.Join(s.dir, rel))
	if err != nil {
		return err
	}
	step()
	from, err := pathguard.OpenDir(filepath.Join(s.dir, rel))
	if err != nil {
		return err
	}
	defer unix.Close(from)
	to, err := pathguard.OpenDir(filepath.Join(s.work, rel))
	if err != nil {
		return fmt.Errorf("keep %s: %w", rel, err)
	}
	defer unix.Close(to)
	for _, e := range entries {
		step()
		r := filepath.Join(rel, e.Name())
		switch {
		case s.linked[r] && e.Type()&fs.ModeSymlink != 0:
			continue // the mirror's link: what it points to is in place
		case s.made[r]:
			if err := unix.Mkdirat(to, e.Name(), 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("keep %s: %w", r, err)
			}
			if err := s.commitDir(r, step); err != nil {
				return err
			}
			continue
		}
		if err := unix.Renameat(from, e.Name(), to, e.Name()); err != nil {
			return fmt.Errorf("keep %s: %w", r, err)
		}
	}
	return nil
}

// Remove deletes the scratch directory (links, not what they point to).
func (s *Dir) Remove() {
	os.RemoveAll(s.dir)
	os.Remove(filepath.Dir(s.dir)) // the parent too, once no attempt uses it
}

// ownerOf is the uid that owns fi's file.
func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
