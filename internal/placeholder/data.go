package placeholder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/mq-hpc/mq/internal/placeholder/sumcache"
	"github.com/mq-hpc/mq/internal/stage"
	"github.com/mq-hpc/mq/protocol"
)

// Data staging, the agent's side (DESIGN.md, "Data staging"). With a data
// root (Config.DataRoot, a site that shares no filesystem with the CLS
// host), a declared path P (the file's absolute path on the CLS host) is
// found at stage.Rooted(root, P), and a job submitted in directory C runs
// in stage.Rooted(root, C): relative paths in its command resolve under
// the root. Absolute paths written in a command line are not rewritten;
// files declared with one are Local, the site's own: never moved, and
// looked for at their own path. Without a data root (local placeholders,
// --shared-fs sites) every path is used as it is.
//
// Before the command starts, every declared input must be a regular file
// of the expected size where the job will read it, and, below a data
// root, of the SHA-256 the CLS staged when it knows it (checkSum);
// otherwise the command does not run and the attempt fails with a reason
// starting "input:".
// After the command exits 0, each declared output that is not Local is
// hashed where it was made and reported (Report.Outputs); one that is
// missing fails the attempt with a reason starting "output:". Hashing runs
// after the command, within the attempt (the job stays leased and
// heartbeated meanwhile), but outside the command's own run time.

// Reasons of the attempts the agent fails for their data.
const (
	reasonInput  = "input: "
	reasonOutput = "output: "
)

// exitInput is the exit status reported for a job whose command did not
// run for want of an input: as for a command that could not start.
const exitInput = 127

// place is where the job's declared files are, for Local or not.
func (a *Agent) place(local bool) stage.Dir {
	if local {
		return stage.Dir{}
	}
	return stage.Dir{Root: a.cfg.DataRoot}
}

// where names this placeholder's place in reasons.
func (a *Agent) where() string {
	if a.cfg.Host == "" {
		return "site " + a.cfg.Site
	}
	return fmt.Sprintf("site %s (host %s)", a.cfg.Site, a.cfg.Host)
}

// workDir is the directory a job runs in: its Cwd, under the data root if
// there is one (made when missing).
func (a *Agent) workDir(cwd string) (string, error) {
	if a.cfg.DataRoot == "" || cwd == "" {
		return cwd, nil
	}
	dir, err := stage.Rooted(a.cfg.DataRoot, cwd)
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		err = fmt.Errorf("working directory %s: %w", dir, err)
		if werr := writable(a.cfg.DataRoot); werr != nil {
			// Not this job's directory: the data root itself.
			return "", placeFault{fmt.Errorf("data root %s: %w", a.cfg.DataRoot, werr)}
		}
		return "", err
	}
	return dir, nil
}

// checkInputs says why the job must not start ("" when every declared
// input is there, whole as far as its size tells: the first one that is
// not), and lists the movable inputs not found whole (Report.Missing:
// the CLS stages them again), with a data root only: without one the
// files are the user's own, which staging never writes.
func (a *Agent) checkInputs(ctx context.Context, asg protocol.Assignment) (why string, missing []string) {
	for _, f := range asg.Inputs {
		info, err := a.place(f.Local).Stat(ctx, f.Path)
		bad := ""
		switch {
		case errors.Is(err, fs.ErrNotExist):
			bad = fmt.Sprintf("%s%s missing at %s (not staged there, or deleted behind the CLS's back)", reasonInput, f.Path, a.where())
		case err != nil:
			why = cmp.Or(why, fmt.Sprintf("%s%s at %s: %v", reasonInput, f.Path, a.where(), err))
			continue // not the file's fault (a path refused, a permission): staging again would not help
		case !info.Regular:
			bad = fmt.Sprintf("%s%s at %s is not a regular file", reasonInput, f.Path, a.where())
		case f.Size >= 0 && info.Size != f.Size:
			bad = fmt.Sprintf("%s%s at %s has %d bytes, not the %d expected (changed or cut behind the CLS's back)", reasonInput, f.Path, a.where(), info.Size, f.Size)
		default:
			bad = a.checkSum(ctx, f)
			if bad == "" {
				continue
			}
		}
		why = cmp.Or(why, bad)
		if !f.Local && a.cfg.DataRoot != "" {
			missing = append(missing, f.Path)
		}
	}
	return why, missing
}

// checkSum says why a staged input is not the one the CLS staged ("" when
// it is): with a data root, an input the CLS knows the SHA-256 of is
// hashed before the command starts, so a file swapped for other bytes of
// the same size (by whoever could write the data root) is staged again,
// never read. The CLS host's own files (no data root, Local) are the
// user's, and not hashed.
func (a *Agent) checkSum(ctx context.Context, f protocol.AssignedFile) string {
	if f.Local || a.cfg.DataRoot == "" || f.SHA256 == "" {
		return ""
	}
	full, err := stage.Rooted(a.cfg.DataRoot, f.Path)
	if err != nil {
		return fmt.Sprintf("%s%s at %s: %v", reasonInput, f.Path, a.where(), err)
	}
	before, known := sumcache.Identify(full)
	if known && a.sums.Checked(full, before, strings.ToLower(f.SHA256)) {
		return ""
	}
	sum, _, err := stage.HashFile(ctx, a.place(false), f.Path)
	switch {
	case err != nil:
		return fmt.Sprintf("%s%s at %s: %v", reasonInput, f.Path, a.where(), err)
	case !strings.EqualFold(sum, f.SHA256):
		return fmt.Sprintf("%s%s at %s has SHA-256 %s, not the %s staged (changed behind the CLS's back)", reasonInput, f.Path, a.where(), sum, protocol.ClipText(f.SHA256, 64))
	}
	if after, ok := sumcache.Identify(full); known && ok && after == before {
		a.sums.Remember(full, before, strings.ToLower(sum))
	}
	return ""
}

// sumOutputs hashes the job's declared outputs that are not Local, one
// that is a symbolic link replaced first by what it links to (outlink.go).
// why is set when one could not be: missing (the job did not make it),
// unreadable, or a link to what mq does not stage.
func (a *Agent) sumOutputs(ctx context.Context, asg protocol.Assignment) (sums []protocol.FileSum, why string) {
	for _, f := range asg.Outputs {
		if f.Local {
			continue
		}
		if why := a.resolveOutputLink(ctx, asg, f.Path); why != "" {
			return nil, why
		}
		sum, n, err := stage.HashFile(ctx, a.place(false), f.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Sprintf("%s%s was not created", reasonOutput, f.Path)
		case err != nil:
			return nil, fmt.Sprintf("%s%s at %s: %v", reasonOutput, f.Path, a.where(), err)
		}
		sums = append(sums, protocol.FileSum{Path: f.Path, Size: n, SHA256: sum})
	}
	return sums, ""
}
