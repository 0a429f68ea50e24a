package protocol

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Capacity is an amount of one placeholder's resources: what it holds
// (Register.Capacity), what its site asked the batch system for
// (Register.Asked), what it has free (Next.Available), or what one job
// was granted (Assignment.Grant).
//
// A Capacity that gives only CPUs is today's placeholder of that many
// slots, and a job granted one CPU is one slot.
type Capacity struct {
	CPUs int `json:"cpus"`
	// CoreIDs are the cores' ids (len CPUs) when known: the cores a job
	// is pinned to. Nil when not known or not chosen.
	CoreIDs []int `json:"core_ids,omitempty"`
	// Mem is in bytes; 0 means not known (a placeholder) or not limited
	// (a grant): memory is then not counted.
	Mem  int64 `json:"mem,omitempty"`
	GPUs int   `json:"gpus,omitempty"`
	// GPUIDs name the GPUs (len GPUs) as CUDA_VISIBLE_DEVICES does, when
	// known or chosen.
	GPUIDs []string `json:"gpu_ids,omitempty"`
	// Named are amounts of site-declared resources (licences, scratch).
	Named map[string]int `json:"resources,omitempty"`
}

// Limits of a Capacity, as CheckCapacity enforces them.
const (
	MaxCapacityCPUs  = 1 << 16
	MaxCapacityCores = 512 // core ids listed one by one
	MaxCapacityGPUs  = 64
	MaxGPUIDBytes    = 128 // a MIG device's id is about 60
	MaxNamedBytes    = 64
	// MaxNamed (resources.go) bounds the named amounts, as of a request.
)

// CheckCapacity reports the first thing wrong with c, in one line. what
// names it ("capacity", "grant").
func CheckCapacity(what string, c Capacity) error {
	switch {
	case c.CPUs < 0 || c.CPUs > MaxCapacityCPUs:
		return fmt.Errorf("%s: cpus must be 0..%d, not %d", what, MaxCapacityCPUs, c.CPUs)
	case c.CoreIDs != nil && len(c.CoreIDs) != c.CPUs:
		return fmt.Errorf("%s: %d core ids for %d cpus", what, len(c.CoreIDs), c.CPUs)
	case len(c.CoreIDs) > MaxCapacityCores:
		return fmt.Errorf("%s: %d core ids; at most %d", what, len(c.CoreIDs), MaxCapacityCores)
	case c.Mem < 0:
		return fmt.Errorf("%s: negative memory", what)
	case c.GPUs < 0 || c.GPUs > MaxCapacityGPUs:
		return fmt.Errorf("%s: gpus must be 0..%d, not %d", what, MaxCapacityGPUs, c.GPUs)
	case c.GPUIDs != nil && len(c.GPUIDs) != c.GPUs:
		return fmt.Errorf("%s: %d GPU ids for %d gpus", what, len(c.GPUIDs), c.GPUs)
	case len(c.Named) > MaxNamed:
		return fmt.Errorf("%s: %d named resources; at most %d", what, len(c.Named), MaxNamed)
	}
	seen := make(map[int]bool, len(c.CoreIDs))
	for _, id := range c.CoreIDs {
		if id < 0 || id >= 1<<20 || seen[id] {
			return fmt.Errorf("%s: core id %d out of range or repeated", what, id)
		}
		seen[id] = true
	}
	gseen := make(map[string]bool, len(c.GPUIDs))
	for _, id := range c.GPUIDs {
		if id == "" || len(id) > MaxGPUIDBytes || gseen[id] || strings.ContainsAny(id, ", \t\n") || Printable(id) != id {
			return fmt.Errorf("%s: GPU id %q empty, too long, repeated or not printable", what, Printable(id))
		}
		gseen[id] = true
	}
	for name, n := range c.Named {
		if !isIdentifier(name) || len(name) > MaxNamedBytes {
			return fmt.Errorf("%s: resource name %q: want letters, digits and _, not starting with a digit, at most %d", what, Printable(name), MaxNamedBytes)
		}
		if n < 0 || n > math.MaxInt32 {
			return fmt.Errorf("%s: resource %s=%d out of range", what, name, n)
		}
	}
	return nil
}

// String formats c as "cpus=16 mem=64 GiB gpus=0,1 licence=2", for logs
// and listings.
func (c Capacity) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cpus=%d", c.CPUs)
	if c.Mem > 0 {
		b.WriteString(" mem=" + formatBytes(c.Mem))
	}
	switch {
	case len(c.GPUIDs) > 0:
		b.WriteString(" gpus=" + strings.Join(c.GPUIDs, ","))
	case c.GPUs > 0:
		fmt.Fprintf(&b, " gpus=%d", c.GPUs)
	}
	names := make([]string, 0, len(c.Named))
	for k := range c.Named {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, " %s=%d", k, c.Named[k])
	}
	return b.String()
}

// formatBytes is "8 GiB", "9.1 GiB", "500 MiB": binary units, one decimal.
func formatBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size {
			s := fmt.Sprintf("%.1f", float64(n)/float64(u.size))
			return strings.TrimSuffix(s, ".0") + " " + u.name
		}
	}
	return fmt.Sprintf("%d B", n)
}

func isIdentifier(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// ReasonMemory starts the reason of an attempt its placeholder killed for
// going over the memory it was granted: "memory: max RSS 9.1 GiB over its
// request of 8 GiB". It is the job's doing (it failed), but not a failure
// of its own: the CLS may run it again with more memory.
const ReasonMemory = "memory: "

// MemoryReason is the reason of an attempt killed for its memory, from
// what the placeholder saw.
func MemoryReason(detail string) string { return ReasonMemory + detail }

// IsMemoryReason reports whether a report's reason says its attempt was
// killed for going over its memory.
func IsMemoryReason(reason string) bool { return strings.HasPrefix(reason, ReasonMemory) }
