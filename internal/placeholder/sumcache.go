package placeholder

import (
	"os"
	"sync"
	"syscall"
	"time"
)

// sumCache remembers staged inputs whose SHA-256 was checked, by the
// file's identity: device, inode, size, and modification and change times.
// An input read by many jobs (a reference genome) is then hashed once per
// change, not once per job. A file replaced by rename has another inode;
// one written in place has a new change time, which no unprivileged user
// can set back; so a file whose identity is unchanged still has the bytes
// that were hashed. File times tick coarsely (a few milliseconds), so a
// file changed less than settle before it was hashed is not remembered: a
// write in the same tick would leave its times as they were.
type sumCache struct {
	mu  sync.Mutex
	m   map[string]checkedSum
	now func() time.Time // nil: time.Now (tests move it)
}

// settle is how long a file must have been unchanged before its hash is
// remembered.
const settle = time.Second

// maxCheckedSums bounds the cache; past it the cache starts afresh.
const maxCheckedSums = 4096

type checkedSum struct {
	id  fileIdentity
	sum string
}

type fileIdentity struct {
	dev, ino             uint64
	size                 int64
	mtimeNsec, ctimeNsec int64
}

// identify is path's identity, ok false when it cannot be had (then the
// file is hashed every time).
func identify(path string) (fileIdentity, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileIdentity{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return fileIdentity{}, false
	}
	return fileIdentity{
		dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtimeNsec: st.Mtim.Nano(), ctimeNsec: st.Ctim.Nano(),
	}, true
}

// checked reports whether path, as it is now (id), was hashed to sum.
func (c *sumCache) checked(path string, id fileIdentity, sum string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[path]
	return ok && e.id == id && e.sum == sum
}

// remember records that path, as it was (id) both before and after it was
// hashed, has sum, unless it changed too lately (settle).
func (c *sumCache) remember(path string, id fileIdentity, sum string) {
	now := time.Now
	if c.now != nil {
		now = c.now
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
