package resource

import (
	"fmt"
	"slices"
)

// TakeExact takes r from the pool giving it the cores and GPUs named by
// id, as the CLS chose them for a job: each must be the pool's and free,
// and there must be as many as r asks. A nil cores (or gpus) chooses as
// Take does. On error nothing is taken: the placeholder's own view and
// the CLS's differ, and the caller may Take instead.
func (p *Pool) TakeExact(r Request, cores []int, gpus []string) (Grant, error) {
	if !p.Fits(r) {
		return Grant{}, fmt.Errorf("%s does not fit what is free (%s)", r, p.Free())
	}
	var want coreSet
	if cores != nil && p.hasCores {
		if len(cores) != r.Cores() {
			return Grant{}, fmt.Errorf("%d core ids for %d cpus", len(cores), r.Cores())
		}
		for _, id := range cores {
			i := slices.Index(p.c.CoreIDs, id)
			if i < 0 || p.cores[i/64]&(1<<(i%64)) == 0 || want[i/64]&(1<<(i%64)) != 0 {
				return Grant{}, fmt.Errorf("core %d is not a free core of this placeholder", id)
			}
			want[i/64] |= 1 << (i % 64)
		}
	}
	var wantGPUs uint64
	if gpus != nil {
		if len(gpus) != r.GPUs {
			return Grant{}, fmt.Errorf("%d GPU ids for %d gpus", len(gpus), r.GPUs)
		}
		for _, id := range gpus {
			i := slices.Index(p.c.GPUIDs, id)
			if i < 0 || p.gpus&(1<<i) == 0 || wantGPUs&(1<<i) != 0 {
				return Grant{}, fmt.Errorf("GPU %q is not a free GPU of this placeholder", id)
			}
			wantGPUs |= 1 << i
		}
	}
	g, _ := p.Take(r) // fits: checked above
	if cores != nil && p.hasCores && want != g.cores {
		for w := range g.cores {
			p.cores[w] = p.cores[w] | g.cores[w]&^want[w]
			p.cores[w] &^= want[w]
		}
		g.cores = want
	}
	if gpus != nil && wantGPUs != g.gpus {
		p.gpus = (p.gpus | g.gpus) &^ wantGPUs
		g.gpus = wantGPUs
	}
	return g, nil
}
