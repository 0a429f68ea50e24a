package bundles

// Heir is the member of job id's bundle, id aside, that running says
// runs on placeholder ph, and its attempt: a bundle runs its jobs in turn
// in its first job's grant, which goes back to the pool only with the
// last of them. ok is false when id is in no bundle or no other member
// runs there.
func (b *Bundles) Heir(id, ph int64, running func(job int64) (attempt int, at int64, ok bool)) (job int64, attempt int, ok bool) {
	bid, in := b.of[id]
	if !in {
		return 0, 0, false
	}
	for _, m := range b.members[bid] {
		if m == id {
			continue
		}
		if a, at, ok := running(m); ok && at == ph {
			return m, a, true
		}
	}
	return 0, 0, false
}
