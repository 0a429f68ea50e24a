package catalog

import "time"

// Made records that job made path at place p (Produced) and, when a plan
// keeps the file at another site (planned says which), asks for a copy
// there (KeepAt): a plan that put the file elsewhere, or a producer that
// ran elsewhere than planned, still has it where the plan's consumers
// run. A file without a checksum is not kept elsewhere. The jobs a copy
// that cannot be made fails are returned (nil: none).
func (c *Catalog) Made(path string, p Place, size int64, sha string, job int64, when time.Time, planned func(path string) (site string, ok bool)) (*Unstageable, error) {
	if err := c.Produced(path, p, size, sha, job, when); err != nil || sha == "" {
		return nil, err
	}
	if site, ok := planned(path); ok && site != p.Site {
		return c.KeepAt(path, site, job), nil
	}
	return nil, nil
}
