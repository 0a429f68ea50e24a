package packing

import "github.com/mq-hpc/mq/internal/resource"

// Placeholders of one shape hold the same jobs. The choosing policies
// (DC, XSufferage) price a job only at the predicted arrivals of
// placeholders that could hold it (policy.Snapshot.Holds); a class stands
// for a shape, so that is one check per shape among the arrivals, not
// one per placeholder.

// maxClasses bounds the shapes numbered; a placeholder of a shape past
// it is class 0, priced as a slot (the choosers then do not wait for it).
const maxClasses = 1024

// classes numbers the shapes of the placeholders registered.
type classes struct {
	of     map[int64]int32  // placeholder -> its class
	byKey  map[string]int32 // shape (Capacity.String) -> its class
	shapes []resource.Capacity
}

func (c *classes) add(ph int64, shape resource.Capacity) {
	key := shape.String()
	n, ok := c.byKey[key]
	if !ok && len(c.shapes) < maxClasses {
		if c.byKey == nil {
			c.byKey, c.of = map[string]int32{}, map[int64]int32{}
		}
		c.shapes = append(c.shapes, shape)
		n = int32(len(c.shapes))
		c.byKey[key] = n
	}
	if n > 0 {
		c.of[ph] = n
	} else {
		delete(c.of, ph)
	}
}

// Class is placeholder ph's class for HoldsClass; 0 when it has no pool
// (a slot, holding only the jobs that ask for nothing).
func (p *Packing) Class(ph int64) int32 { return p.classes.of[ph] }

// HoldsClass says whether a placeholder of class could hold job id, empty:
// the shape test (resource.Capacity.Holds), an auto size resolved as
// Fits would resolve it there.
func (p *Packing) HoldsClass(class int32, id int64) bool {
	r := p.reqs[id]
	if class <= 0 || int(class) > len(p.classes.shapes) {
		return isZero(r)
	}
	c := p.classes.shapes[class-1]
	if r.AutoCPUs || r.AutoMem {
		r = p.learn.Resolve(p.cats[id], r, resource.Request{CPUs: c.CPUs, Mem: c.Mem})
	}
	return c.Holds(r)
}
