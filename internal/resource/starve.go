package resource

import "time"

// Starving reports whether a pool must reserve itself for big: big fits
// the pool's shape but not what is free now, and it has waited at least
// bound. From then on the pool takes only jobs that Admits allows, so
// the jobs running on it drain until big fits; big's wait is bounded by
// bound plus the longest run of the jobs the pool held when it began
// reserving.
func Starving(p *Pool, big Request, waited, bound time.Duration) bool {
	return waited >= bound && p.c.Holds(big) && !p.Fits(big)
}

// Admits reports whether a pool reserved for big may take small now
// without delaying big: small must fit in what is left free once big's
// need is set aside, in every dimension. Where big is short (most often
// cores), nothing is left, so nothing that uses that dimension is taken;
// where it is not (cores, while big waits for a GPU), small jobs still
// use the spare. Without run time estimates this is Slurm's backfill
// with every job assumed to outlast the reservation.
func Admits(p *Pool, big, small Request) bool {
	if small.Cores() > p.cpus-big.Cores() {
		return false
	}
	if small.GPUs > 0 && small.GPUs > p.ngpu-big.GPUs {
		return false
	}
	if p.c.Mem > 0 && small.Mem > 0 && small.Mem > p.mem-big.Mem {
		return false
	}
	for name, n := range small.Named {
		if n > p.named[name]-big.Named[name] {
			return false
		}
	}
	return true
}
