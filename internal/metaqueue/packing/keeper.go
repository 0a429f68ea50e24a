package packing

import "context"

// Core runs a read of the packing state on the core's goroutine, which
// owns it.
type Core interface {
	Do(ctx context.Context, fn func() error) error
}

// Needs says how long the core expects each job to take (dispatch.Need:
// its estimate, else its queue's ceiling; 0: unknown).
type Needs interface {
	Need(id int64) float64
}

// JobsCore is the core that Keeper reads on.
type JobsCore interface {
	Core
	Needs
}

// Keeper says that the store keeps and honours jobs' resource requests,
// and warns of a submission's jobs none can ever hold (Store.Resources).
type Keeper struct {
	p    *Packing
	core JobsCore
}

// NewKeeper is p's warnings, read on core.
func NewKeeper(p *Packing, core JobsCore) Keeper { return Keeper{p: p, core: core} }

// KeepsResources reports that requests are kept and honoured (the server
// then warns of none).
func (k Keeper) KeepsResources() bool { return true }

// Unholdable says, for the jobs first..first+n-1 just submitted, which ask
// for more than any placeholder or site can ever hold, or are expected to
// take longer than any can run (Unholdables).
func (k Keeper) Unholdable(ctx context.Context, first int64, n int) ([]string, error) {
	var out []string
	err := k.core.Do(ctx, func() error { out = k.p.Unholdables(first, n, k.core); return nil })
	return out, err
}

// Embedded records the site of the CLS's own local placeholders (cls
// serve --local N), which the store does not keep: that they run jobs
// without a time limit counts for the warnings from the start, not only
// once one of them has registered. (What they hold is known only then:
// they detect it, GPUs included.)
func (k Keeper) Embedded(ctx context.Context, name string) error {
	return k.core.Do(ctx, func() error { k.p.siteWalltime(name, 0); return nil })
}
