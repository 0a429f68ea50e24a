package packing

import (
	"fmt"
	"math"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// A job expected to take longer than any placeholder can run (its time
// limit or estimate, else its queue's ceiling: dispatch.Need) is never
// handed out (dispatch.FitsWalltime), and no site submits a placeholder
// for it. It waits, as a site may be added or given a longer walltime;
// TooLong says why, for mqstat -j and mqsub's warning, as Unholdable does
// for a request no placeholder can hold.

// walls is what packing knows of how long placeholders can run jobs.
type walls struct {
	ph   map[int64]float64  // placeholder registered -> its walltime (0: no limit)
	site map[string]float64 // site -> its placeholders' (wire.SiteWalltime)
	// left is the longest walltime of the placeholders gone (+Inf: one
	// had no limit), for the reason Unholdable keeps theirs.
	left float64
}

// PlaceholderWalltime records that placeholder ph, registering, could run
// jobs for walltime seconds (0: no limit).
func (p *Packing) PlaceholderWalltime(ph int64, walltime float64) {
	if p.walls.ph == nil {
		p.walls.ph = map[int64]float64{}
	}
	p.walls.ph[ph] = walltime
}

// siteWalltime records that site name's placeholders can run jobs for
// walltime seconds (wire.SiteWalltime; 0: no limit).
func (p *Packing) siteWalltime(name string, walltime float64) {
	if p.walls.site == nil {
		p.walls.site = map[string]float64{}
	}
	p.walls.site[name] = walltime
}

// wallGone keeps placeholder ph's walltime among those of the
// placeholders gone.
func (p *Packing) wallGone(ph int64) {
	w, ok := p.walls.ph[ph]
	if !ok {
		return
	}
	delete(p.walls.ph, ph)
	if w <= 0 {
		w = math.Inf(1)
	}
	p.walls.left = max(p.walls.left, w)
}

// longest is the longest any placeholder registered (now or before it
// left) or any site's can run a job, and the site's name ("": a
// placeholder's): +Inf when one has no limit, 0 when none is known.
func (p *Packing) longest() (w float64, site string) {
	for name, v := range p.walls.site {
		if v <= 0 {
			v = math.Inf(1)
		}
		if v > w || v == w && name < site {
			w, site = v, name
		}
	}
	for _, v := range p.walls.ph {
		if v <= 0 {
			v = math.Inf(1)
		}
		if v > w {
			w, site = v, ""
		}
	}
	if p.walls.left > w {
		w, site = p.walls.left, ""
	}
	return w, site
}

// TooLong says why a job expected to take need seconds cannot run on any
// placeholder known, "" if one can (or none is known yet).
func (p *Packing) TooLong(need float64) string {
	w, site := p.longest()
	return tooLong(need, w, site)
}

// tooLong is TooLong with the longest walltime w known, at site ("": a
// placeholder's).
func tooLong(need, w float64, site string) string {
	if need <= 0 || w == 0 || need <= w {
		return ""
	}
	return fmt.Sprintf("expected to take %s; the longest a placeholder or site runs a job is %s (%s)", seconds(need), seconds(w), whose(site))
}

// whose says where the longest walltime known is: at site, or ("") a
// placeholder's.
func whose(site string) string {
	if site == "" {
		return "a placeholder's --walltime"
	}
	return "site " + site + ": its --walltime less a margin to report"
}

// Outgrown says why a job that its placeholder's walltime stopped, having
// learned it needs floor seconds (runs.Run.WalltimeFloor: more than a
// whole placeholder of that walltime), fails now instead of running again:
// no placeholder or site known runs a job that long, so each attempt
// left would be stopped as this one was, a whole walltime spent each
// time. "" when one does (it waits for that one), or none is known.
func (p *Packing) Outgrown(floor float64) string {
	if floor <= 0 {
		return "" // the common case: no walltime stop, nothing looked up
	}
	w, site := p.longest()
	if tooLong(floor, w, site) == "" {
		return ""
	}
	return fmt.Sprintf("%s: it needs more than a whole placeholder's walltime, and the longest a placeholder or site runs a job is %s (%s): give a site a longer --walltime, then mqsub --rerun it",
		protocol.ReasonInterrupted, seconds(w), whose(site))
}

// seconds formats s seconds as a duration, to the second.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}
