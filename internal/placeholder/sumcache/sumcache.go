// Package sumcache remembers staged inputs whose SHA-256 an agent checked,
// by the file's identity.
package sumcache

import (
	"os"
	"sync"
	"syscall"
	"time"
)

// Cache remembers staged inputs whose SHA-256 was checked, by the
// file's identity: device, inode, size, and modification and change times.
// An input read by many jobs (a reference genome) is then hashed once per
// change, not once per job. A file replaced by rename has another inode;
// one written in place has a new change time, which no unprivileged user
// can set back; so a file whose identity is unchanged still has the bytes
// that were hashed. File times tick coarsely (a few milliseconds), so a
// file changed less than settle before it was hashed is not remembered: a
// write in the same tick would leave its times as they were.
type Cache struct {
	// Now is the clock (nil: time.Now; tests move it).
	Now func() time.Time

	mu sync.Mutex
	m  map[string]checkedSum
}

// settle is how long a file must have been unchanged before its hash is
// remembered.
const settle = time.Second

// maxCheckedSums bounds the cache; past it the cache starts afresh.
const maxCheckedSums = 4096

type checkedSum struct {
	id  Identity
	sum string
}

// Identity is a file's device, inode, size and times.
type Identity struct {
	dev, ino             uint64
	size                 int64
	mtimeNsec, ctimeNsec int64
}

// Changed is when the file last changed (its ctime).
func (id Identity) Changed() time.Time { return time.Unix(0, id.ctimeNsec) }

// Identify is path's identity, ok false when it cannot be had (then the
// file is hashed every time).
func Identify(path string) (Identity, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return Identity{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return Identity{}, false
	}
	return Identity{
		dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtimeNsec: st.Mtim.Nano(), ctimeNsec: st.Ctim.Nano(),
	}, true
}

// Checked reports whether path, as it is now (id), was hashed to sum.
func (c *Cache) Checked(path string, id Identity, sum string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[path]
	return ok && e.id == id && e.sum == sum
}

// Remember records that path, as it was (id) both before and after it was
// hashed, has sum, unless it changed too lately (settle).
func (c *Cache) Remember(path string, id Identity, sum string) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	if now().UnixNano()-id.ctimeNsec < int64(settle) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCheckedSums {
		c.m = make(map[string]checkedSum)
	}
	c.m[path] = checkedSum{id: id, sum: sum}
}
