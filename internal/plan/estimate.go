package plan

import (
	"math"
	"path"
	"sort"
	"strings"
)

// Runtimes holds what the accounting says about runtimes: per job class
// (CommandClass of the command) and site, how many jobs ended well there
// and their mean elapsed time. It feeds an Estimator.
type Runtimes struct {
	stat map[string]map[string]*runStat
}

type runStat struct {
	n   int
	sum float64
}

func (s *runStat) mean() float64 { return s.sum / float64(s.n) }

// Add records one job of class that ran elapsed seconds at site.
func (r *Runtimes) Add(class, site string, elapsed float64) {
	if class == "" || site == "" || !(elapsed >= 0) || math.IsInf(elapsed, 1) {
		return
	}
	if r.stat == nil {
		r.stat = map[string]map[string]*runStat{}
	}
	bySite := r.stat[class]
	if bySite == nil {
		bySite = map[string]*runStat{}
		r.stat[class] = bySite
	}
	st := bySite[site]
	if st == nil {
		st = &runStat{}
		bySite[site] = st
	}
	st.n++
	st.sum += elapsed
}

// CommandClass is the class a job's runtime is learned under: the base
// name of the program its command runs, past leading VAR=value
// assignments and an env or a shell's -c ("mProjectPP" for
// "/opt/bin/mProjectPP -X in.fits", "map" for "sh -c 'map ...'"). Jobs of
// one class are taken to run alike; a workflow's task types are classes.
func CommandClass(command string) string {
	f := strings.Fields(command)
	for len(f) > 0 {
		w := strings.Trim(f[0], `'"`)
		switch {
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "="):
			f = f[1:]
		case w == "env" || w == "exec" || w == "nice" || w == "time":
			f = f[1:]
		case (w == "sh" || w == "bash") && len(f) > 2 && f[1] == "-c":
			f = f[2:]
		default:
			return path.Base(w)
		}
	}
	return ""
}

// Estimator gives a job's runtime at a site for a planning problem, from
// the best knowledge there is, in this order:
//
//  1. the mean of its class's runs at that site (accounting);
//  2. its class's mean elsewhere, brought to speed 1 by those sites'
//     speeds, over the site's speed;
//  3. its declared estimate (mqsub --est) over the site's speed;
//  4. Default over the site's speed.
//
// A site's speed is the given one (Speed, e.g. cls plan make --site-speed)
// or else learned from the classes that ran there and elsewhere
// (learnSpeeds); 1 when nothing says. A declared estimate is taken as the
// runtime at speed 1. Give speeds for all sites or none: given and
// learned speeds are not on one scale.
type Estimator struct {
	Learned *Runtimes
	Speed   map[string]float64
	Default float64

	learned map[string]float64 // learned speeds, computed once
}

// SiteSpeed is a site's speed: given, else learned, else 1.
func (e *Estimator) SiteSpeed(site string) float64 {
	if v := e.Speed[site]; v > 0 && !math.IsInf(v, 1) {
		return v
	}
	if e.learned == nil {
		e.learned = e.learnSpeeds()
	}
	if v, ok := e.learned[site]; ok {
		return v
	}
	return 1
}

// learnSpeeds computes each site's speed from the classes seen at two
// sites or more: for each, the geometric mean of its per-site means over
// its mean at the site; a site's speed is the geometric mean of those
// ratios. Speeds are relative: the sites a class ran at have speeds
// whose geometric mean is 1, the speed of a site nothing is known of.
func (e *Estimator) learnSpeeds() map[string]float64 {
	out := map[string]float64{}
	if e.Learned == nil {
		return out
	}
	logs := map[string][]float64{}
	for _, bySite := range e.Learned.stat {
		g, n := 0.0, 0
		for _, st := range bySite {
			if st.mean() > 0 {
				g += math.Log(st.mean())
				n++
			}
		}
		if n < 2 {
			continue
		}
		g /= float64(n)
		for site, st := range bySite {
			if st.mean() > 0 {
				logs[site] = append(logs[site], g-math.Log(st.mean()))
			}
		}
	}
	for site, l := range logs {
		sort.Float64s(l) // a fixed order: the same sum every time
		s := 0.0
		for _, v := range l {
			s += v
		}
		out[site] = math.Exp(s / float64(len(l)))
	}
	return out
}

// Source says where an estimate came from.
type Source int

// The sources of an estimate, best first.
const (
	FromSite     Source = iota // the class's runs at this site
	FromClass                  // the class's runs elsewhere, scaled by speeds
	FromDeclared               // the job's declared estimate
	FromDefault                // the default
)

// Est is the runtime of a job of class, declaring declared seconds (0:
// none), at site, and where it came from.
func (e *Estimator) Est(class string, declared float64, site string) (float64, Source) {
	var bySite map[string]*runStat
	if e.Learned != nil {
		bySite = e.Learned.stat[class]
	}
	if st, ok := bySite[site]; ok {
		return st.mean(), FromSite
	}
	speed := e.SiteSpeed(site)
	if len(bySite) > 0 {
		sites := make([]string, 0, len(bySite))
		for s := range bySite {
			sites = append(sites, s)
		}
		sort.Strings(sites)
		base := 0.0
		for _, s := range sites {
			base += bySite[s].mean() * e.SiteSpeed(s)
		}
		return base / float64(len(sites)) / speed, FromClass
	}
	if declared > 0 {
		return declared / speed, FromDeclared
	}
	return e.Default / speed, FromDefault
}
