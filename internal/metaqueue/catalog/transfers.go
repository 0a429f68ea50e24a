package catalog

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// The transfers: what the catalog asks of the stager and what it records
// of the copies made. StageRequest, StageResult and Stager are the store's
// side of the contract with the stager (package cls drives a stage.Mover
// with it).

// StageRequest asks the stager to copy Path to To from one of From (best
// first). The stager calls the store's Staged when the copy ended,
// whichever way.
type StageRequest struct {
	Path   string
	To     Place
	From   []Place
	Size   int64  // -1 = unknown
	SHA256 string // hex; "" = unknown: the stager computes it
	// ModTime is a user's file's modification time on the CLS host at
	// submit (zero otherwise): the stager refuses a file that changed
	// since (size or time), rather than stage its new form.
	ModTime time.Time
	Job     int64 // the job that first wanted it, for accounting
}

// StageResult is how a StageRequest ended.
type StageResult struct {
	Path     string
	To, From Place
	Bytes    int64
	Started  time.Time
	Duration time.Duration
	SHA256   string
	Job      int64
	// Err is nil when the replica at To exists now. Permanent says that
	// retrying from another replica cannot help (the file changed since
	// submit, or is missing everywhere): the jobs that need it fail.
	Err       error
	Permanent bool
	// Unreachable lists the places that could not be reached at all (a
	// site whose login host is down): nothing is known to be wrong with
	// the file. When To is among them, or every place tried is, the
	// failure does not count against the file: the places are left alone
	// for a while (PlaceDownFor) and the jobs wait, or run elsewhere.
	Unreachable []Place
	// Full says To had no room for the file (its disk or quota full):
	// the place's fault, not the file's. The failure does not count
	// against the file: To takes no file for FullFor (the stager's
	// backoff; PlaceDownFor when 0), and its jobs wait, or run elsewhere.
	// To still serves as a source.
	Full    bool
	FullFor time.Duration
	// Via is the path taken at each end, "SRC>DST" (fs, sftp or agent),
	// recorded with the transfer.
	Via string
}

// Stager moves files for the store. Stage must not block: it queues the
// request and reports through the store's Staged.
type Stager interface {
	Stage(StageRequest)
}

// Transfer is one copy made, for the record (Record).
type Transfer struct {
	Job      int64
	Path     string
	From, To Place
	Bytes    int64
	Started  time.Time
	Duration time.Duration
	Err, Via string
}

// Record stores a transfer and adds it to the totals, in the core's
// transaction.
func (c *Catalog) Record(t Transfer) error {
	// A transfer's error can carry a site's words (an SFTP server's status
	// message): bounded and escaped before it is stored and shown.
	errText := protocol.ClipText(t.Err, protocol.MaxReasonBytes)
	if _, err := c.st.insTransfer.Exec(t.Job, t.Path, t.From.Site, t.From.Host, t.To.Site, t.To.Host, t.Bytes, t.Duration.Seconds(),
		t.Started.UnixMicro(), errText, protocol.ClipText(t.Via, 64)); err != nil {
		return err
	}
	c.moved.Transfers++
	if errText != "" {
		c.moved.Failed++
	}
	c.moved.Bytes += t.Bytes
	c.moved.Seconds += t.Duration.Seconds()
	return nil
}

// Moved totals the transfers made.
func (c *Catalog) Moved() protocol.MovedTotals { return c.moved }

// ParsePlace reads a place as Place.String writes it ("site" or
// "site:host").
func ParsePlace(s string) Place {
	site, host, _ := strings.Cut(s, ":")
	return Place{site, host}
}

// Outcome is what a stage request's end changed, for the core to act on.
type Outcome struct {
	// Arrived says the replica at the result's To exists now: the file
	// moved there. New says the catalog knew nothing of it before.
	Arrived, New bool
	// Changed says where files can be brought from changed (a place left
	// alone, a failure counted): data-conscious decisions may differ.
	Changed bool
	// Fail is the jobs to fail, when no transfer can bring the file.
	Fail *Unstageable
}

// Staged records how a stage request ended, in the core's transaction:
// the transfer for accounting, and on success the new replica. A failed
// transfer is tried again from another replica (the failed ones last);
// after MaxStageTries failures, or one that cannot be helped (Permanent),
// the jobs waiting for the file there fail (Outcome.Fail).
func (c *Catalog) Staged(ctx context.Context, db Execer, r StageResult, now time.Time) (Outcome, error) {
	errText := ""
	if r.Err != nil {
		errText = r.Err.Error()
	}
	if err := c.Record(Transfer{Job: r.Job, Path: r.Path, From: r.From, To: r.To, Bytes: r.Bytes, Started: r.Started, Duration: r.Duration, Err: errText, Via: r.Via}); err != nil {
		return Outcome{}, err
	}
	out := c.stageEnded(r, now)
	if out.Arrived {
		isNew, err := c.addReplica(ctx, db, r.Path, r.To, r.Bytes, r.SHA256, now)
		if err != nil {
			return Outcome{}, err
		}
		out.New = isNew
	}
	return out, nil
}

// stageEnded is Staged's decision, in memory: the transfer in flight
// ends, or is tried again, or gives up.
func (c *Catalog) stageEnded(r StageResult, now time.Time) Outcome {
	var out Outcome
	k := stageKey{r.Path, r.To}
	st := c.stg.inflight[k]
	if f := c.files[r.Path]; st != nil && st.mtime != 0 && f != nil && f.mtime != st.mtime {
		// The user's file was submitted anew (edited) while this
		// transfer ran: what it brought, or its refusal of the change,
		// is of the old content. It is asked for again, uncounted.
		out.Changed = true
		out.Fail = c.sendStage(k, st, r.Job)
		return out
	}
	if r.Err == nil {
		c.stg.end(k)
		out.Arrived = true
		return out
	}
	if r.Full {
		c.stg.full[r.To] = now.Add(cmp.Or(r.FullFor, PlaceDownFor))
		c.stg.end(k)
		out.Changed = true
		return out
	}
	if len(r.Unreachable) > 0 {
		until := now.Add(PlaceDownFor)
		for _, p := range r.Unreachable {
			c.stg.down[p] = until
		}
		if slices.Contains(r.Unreachable, r.To) || !r.Permanent && c.files[r.Path] != nil && c.allDown(c.files[r.Path], now) {
			// Nothing wrong with the file: its jobs wait, or run
			// where it can be brought.
			c.stg.end(k)
			out.Changed = true
			return out
		}
	}
	if st == nil {
		return out // not asked in this run: jobs ask again
	}
	st.fails++
	st.tried = append(slices.DeleteFunc(st.tried, func(p Place) bool { return p == r.From }), r.From)
	out.Changed = true
	if !r.Permanent && st.fails < MaxStageTries {
		out.Fail = c.sendStage(k, st, r.Job)
	} else {
		out.Fail = c.failStaging(k, st, r.Err)
	}
	return out
}
