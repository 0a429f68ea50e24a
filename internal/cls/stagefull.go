package cls

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mq-hpc/mq/internal/backoff"
	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/protocol"
)

// A full disk at a transfer's target is the site's transient fault, not
// the file's (stage.ErrNoSpace): the target takes no file for a while,
// with backoff (from catalog.PlaceDownFor, doubling up to fullMax), its
// jobs wait or run elsewhere and are never failed for it, and cls site
// list says why until a transfer there succeeds.

// fullMax is the longest a full place is left alone before it is tried
// again.
const fullMax = 5 * time.Minute

// fullPlaces are the places whose disk was full at the last transfer
// there.
type fullPlaces struct {
	mu sync.Mutex
	m  map[catalog.Place]*fullPlace
}

type fullPlace struct {
	b            backoff.Backoff
	since, until time.Time
	why          string
}

// failed records that p had no room at now (err says how) and returns
// how long it takes no file.
func (f *fullPlaces) failed(p catalog.Place, err error, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[catalog.Place]*fullPlace{}
	}
	fp := f.m[p]
	if fp == nil {
		fp = &fullPlace{b: backoff.Backoff{Min: catalog.PlaceDownFor, Max: fullMax}, since: now}
		f.m[p] = fp
	}
	d := fp.b.Next()
	fp.until, fp.why = now.Add(d), protocol.ClipText(err.Error(), 300)
	return d
}

// ok records a transfer to p that succeeded: it has room.
func (f *fullPlaces) ok(p catalog.Place) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, p)
}

// note says, for cls site list, which places of site had no room at the
// last transfer there ("" when none).
func (f *fullPlaces) note(site string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var notes []string
	for p, fp := range f.m {
		if p.Site != site {
			continue
		}
		where := "data root"
		if p.Host != "" {
			where += " on " + p.Host
		}
		notes = append(notes, fmt.Sprintf("%s full since %s, next transfer there after %s: %s",
			where, fp.since.UTC().Format(time.TimeOnly), fp.until.UTC().Format(time.TimeOnly), fp.why))
	}
	sort.Strings(notes)
	return strings.Join(notes, "; ")
}
