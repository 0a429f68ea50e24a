package placeholder

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mq-hpc/mq/internal/pathguard"
	"github.com/mq-hpc/mq/internal/stage"
	"github.com/mq-hpc/mq/protocol"
)

// Per-attempt scratch for jobs that may run as several attempts at once
// (Assignment.Scratch: job replication). The command runs in
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

// scratchDir is the directory, under a job's working directory, that
// holds its attempts' scratch directories.
const scratchDir = ".mq-copies"

// scratch is one attempt's scratch directory.
type scratch struct {
	work, dir string
	// made are the directories made in dir on the way to outputs (paths
	// relative to dir): they exist in work too, or are made there.
	made   map[string]bool
	linked map[string]bool // the links the mirror made (relative to dir)
}

// scratchPath is the attempt's scratch directory under work.
func scratchPath(work string, asg protocol.Assignment) string {
	return filepath.Join(work, scratchDir, strconv.FormatInt(asg.ID, 10)+"."+strconv.Itoa(asg.Attempt))
}

// newScratch makes the attempt's scratch directory under work.
func (a *Agent) newScratch(work string, asg protocol.Assignment) (*scratch, error) {
	s := &scratch{work: work, dir: scratchPath(work, asg), made: map[string]bool{}, linked: map[string]bool{}}
	if err := ownScratchDir(filepath.Join(work, scratchDir)); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(s.dir); err != nil { // a leftover of a killed agent
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	// The outputs, relative to the working directory.
	var outs []string
	for _, f := range asg.Outputs {
		p := f.Path
		if a.cfg.DataRoot != "" {
			if r, err := stage.Rooted(a.cfg.DataRoot, f.Path); err == nil {
				p = r
			}
		}
		rel, err := filepath.Rel(work, p)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			s.remove()
			return nil, fmt.Errorf("output %s is outside the working directory: it cannot be kept apart from other attempts", f.Path)
		}
		outs = append(outs, rel)
	}
	if err := s.mirror("", outs); err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// ownScratchDir makes WORKDIR/.mq-copies if missing and checks that it
// is a directory of ours: in a working directory others may write (/tmp,
// a sticky /scratch) another user could have put a link there to a
// directory of theirs, where they could swap an attempt's files for
// their own before the winner moves them into place.
func ownScratchDir(p string) error {
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
func (s *scratch) mirror(rel string, outs []string) error {
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
		if skip[name] || (rel == "" && name == scratchDir) {
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

// commit moves what the command made in the scratch directory into the
// working directory: every entry that is not one of the links, each file
// with one rename; the directories made on the way to outputs are
// walked into. Each directory of the working directory is opened as
// pathguard opens it, and entries renamed and made by its descriptor:
// in a working directory others may write (/tmp), another user's link
// at out/ to a directory of ours would otherwise have the winner's
// out/res replace our file of that name there.
func (s *scratch) commit(step func()) error { return s.commitDir("", step) }

// commitDir is commit of rel; step is called as each filesystem call
// returns (Agent.keepWithin).
func (s *scratch) commitDir(rel string, step func()) error {
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

// remove deletes the scratch directory (links, not what they point to).
func (s *scratch) remove() {
	os.RemoveAll(s.dir)
	os.Remove(filepath.Dir(s.dir)) // the parent too, once no attempt uses it
}

// claim asks the CLS whether this attempt won the race with the job's
// other attempts: only a winner keeps its outputs and reports Done.
func (a *Agent) claim(ctx context.Context, asg protocol.Assignment) (bool, error) {
	ref := protocol.JobRef{ID: asg.ID, Attempt: asg.Attempt}
	var reply protocol.HeartbeatReply
	err := call(ctx, a, protocol.OpHeartbeat, func(id int64) protocol.Heartbeat {
		return protocol.Heartbeat{Placeholder: id, Running: []protocol.JobRef{ref}, Claim: []protocol.JobRef{ref}}
	}, &reply)
	if err != nil {
		return false, err
	}
	return slices.Contains(reply.Won, ref), nil
}
