package packing

// minGonePrune is the fewest placeholders held that make Registered look
// for those no longer live.
const minGonePrune = 256

// Registered notes that placeholder ph registered, able to run jobs for
// walltime seconds (PlaceholderWalltime). Now and then it forgets, as
// PlaceholderGone does, the placeholders no longer live (live: registered
// and neither swept nor ended): one swept for good (metaqueue/placeholders)
// is not told to packing otherwise, and a key registering in a loop would
// grow its memory for good. It looks when the placeholders held reach
// twice those the last look kept, so the cost is spread over the
// registrations between.
func (p *Packing) Registered(ph int64, walltime float64, live func(ph int64) bool) {
	p.PlaceholderWalltime(ph, walltime)
	if p.heldPlaceholders() < p.goneAt {
		return
	}
	var gone []int64
	for id := range p.walls.ph {
		if !live(id) {
			gone = append(gone, id)
		}
	}
	for id := range p.pools {
		if _, ok := p.walls.ph[id]; !ok && !live(id) {
			gone = append(gone, id)
		}
	}
	for _, id := range gone {
		p.PlaceholderGone(id)
	}
	p.goneAt = max(2*p.heldPlaceholders(), minGonePrune)
}

// heldPlaceholders is how many placeholders packing holds something of.
func (p *Packing) heldPlaceholders() int { return len(p.walls.ph) + len(p.pools) }
