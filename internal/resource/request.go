package resource

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Memory units: Slurm's, which are binary.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
	TiB int64 = 1 << 40
)

// MaxCPUs bounds a parsed core count: larger is a typo, not a machine.
const MaxCPUs = 1 << 16

// MaxGPUs bounds a parsed GPU count and the GPUs a Pool can hold.
const MaxGPUs = 64

// A Request is what one job asks of a placeholder.
//
// The zero Request is today's job: one core, memory not counted, no
// GPUs.
type Request struct {
	CPUs  int            // cores; 0 means 1
	Mem   int64          // bytes; 0 means not counted
	GPUs  int            // whole GPUs
	Named map[string]int // amounts of site-declared resources (licences, scratch, ...)

	// AutoCPUs and AutoMem ask for the size to be learned from the
	// category's finished jobs (see Learner) instead of given.
	AutoCPUs bool
	AutoMem  bool
}

// Cores returns the number of cores r takes: at least one.
func (r Request) Cores() int {
	if r.CPUs < 1 {
		return 1
	}
	return r.CPUs
}

// String formats r the way mqsub's flags spell it.
func (r Request) String() string {
	var b strings.Builder
	if r.AutoCPUs {
		b.WriteString("cpus=auto")
	} else {
		fmt.Fprintf(&b, "cpus=%d", r.Cores())
	}
	switch {
	case r.AutoMem:
		b.WriteString(" mem=auto")
	case r.Mem > 0:
		b.WriteString(" mem=" + FormatMem(r.Mem))
	}
	if r.GPUs > 0 {
		fmt.Fprintf(&b, " gpus=%d", r.GPUs)
	}
	for _, name := range sortedNames(r.Named) {
		fmt.Fprintf(&b, " %s=%d", name, r.Named[name])
	}
	return b.String()
}

// SetCPUs sets r's cores from a flag value: a count, or "auto".
func (r *Request) SetCPUs(s string) error {
	if strings.EqualFold(s, "auto") {
		r.CPUs, r.AutoCPUs = 0, true
		return nil
	}
	n, err := ParseCPUs(s)
	if err != nil {
		return err
	}
	r.CPUs, r.AutoCPUs = n, false
	return nil
}

// SetMem sets r's memory from a flag value: a size, or "auto".
func (r *Request) SetMem(s string) error {
	if strings.EqualFold(s, "auto") {
		r.Mem, r.AutoMem = 0, true
		return nil
	}
	n, err := ParseMem(s)
	if err != nil {
		return err
	}
	r.Mem, r.AutoMem = n, false
	return nil
}

// AddNamed adds a "NAME=N" flag value to r's named resources; a name
// given twice is an error.
func (r *Request) AddNamed(s string) error {
	name, n, err := ParseNamed(s)
	if err != nil {
		return err
	}
	if _, dup := r.Named[name]; dup {
		return fmt.Errorf("resource %q given twice", name)
	}
	if r.Named == nil {
		r.Named = make(map[string]int)
	}
	r.Named[name] = n
	return nil
}

// ParseCPUs parses a core count: a positive integer.
func ParseCPUs(s string) (int, error) {
	return parseCount("cpus", s, MaxCPUs)
}

// ParseGPUs parses a GPU count: a positive integer.
func ParseGPUs(s string) (int, error) {
	return parseCount("gpus", s, MaxGPUs)
}

func parseCount(what, s string, max int) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("%s: empty; want a positive integer", what)
	}
	if !allDigits(s) {
		return 0, fmt.Errorf("%s %q: want a positive integer", what, s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > max {
		return 0, fmt.Errorf("%s %q: more than %d", what, s, max)
	}
	if n == 0 {
		return 0, fmt.Errorf("%s %q: must be at least 1", what, s)
	}
	return n, nil
}

// ParseNamed parses "NAME=N": NAME an identifier (letters, digits and
// underscores, not starting with a digit), N a positive integer.
func ParseNamed(s string) (string, int, error) {
	name, num, ok := strings.Cut(s, "=")
	if !ok {
		return "", 0, fmt.Errorf("resource %q: want NAME=N", s)
	}
	if err := CheckName(name); err != nil {
		return "", 0, fmt.Errorf("resource %q: %w", s, err)
	}
	n, err := parseCount(name, num, math.MaxInt32)
	if err != nil {
		return "", 0, fmt.Errorf("resource %q: want a positive integer after =", s)
	}
	return name, n, nil
}

// CheckName reports what is wrong with the NAME of a "NAME=N" amount:
// not an identifier, or one of the resources with flags of their own.
func CheckName(name string) error {
	if !isIdent(name) {
		return fmt.Errorf("%q is not a name (letters, digits, _; not starting with a digit)", name)
	}
	switch strings.ToLower(name) {
	case "cpus", "mem", "gpus":
		return fmt.Errorf("%s has its own flag, --%s", name, strings.ToLower(name))
	}
	return nil
}

var units = map[string]int64{"": MiB, "K": KiB, "M": MiB, "G": GiB, "T": TiB}

var errMemSyntax = errors.New("want a number and a unit: 8G, 500M, 1.5G (a bare number is MiB)")

// ParseMem parses a memory size as Slurm writes it: a number (a decimal
// fraction allowed) and a binary unit K, M, G or T, any case, optionally
// followed by B or iB. A bare number is MiB. The result is in bytes,
// rounded up, and positive.
func ParseMem(s string) (int64, error) {
	num := s
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	unit := ""
	if i >= 0 {
		num, unit = s[:i], strings.ToUpper(s[i:])
	}
	if num == "" || strings.Count(num, ".") > 1 || num == "." {
		return 0, fmt.Errorf("memory %q: %v", s, errMemSyntax)
	}
	if len(unit) > 1 {
		unit = strings.TrimSuffix(unit[1:], "IB")
		unit = strings.TrimSuffix(unit, "B")
		if unit != "" {
			return 0, fmt.Errorf("memory %q: unknown unit %q; use K, M, G or T", s, s[i:])
		}
		unit = strings.ToUpper(s[i : i+1])
	}
	mult, ok := units[unit]
	if !ok {
		return 0, fmt.Errorf("memory %q: unknown unit %q; use K, M, G or T", s, s[i:])
	}
	v, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("memory %q: %v", s, errMemSyntax)
	}
	v.Mul(v, new(big.Rat).SetInt64(mult))
	// Round a fraction of a byte up.
	q, r := new(big.Int).QuoRem(v.Num(), v.Denom(), new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("memory %q: too large", s)
	}
	if q.Sign() == 0 {
		return 0, fmt.Errorf("memory %q: must be more than zero", s)
	}
	return q.Int64(), nil
}

// FormatMem formats a byte count in the largest binary unit it reaches,
// to one decimal: "8 GiB", "9.1 GiB", "500 MiB".
func FormatMem(n int64) string {
	unit, name := int64(1), "B"
	for _, u := range []struct {
		size int64
		name string
	}{{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if n >= u.size || n <= -u.size {
			unit, name = u.size, u.name
			break
		}
	}
	if unit == 1 {
		return strconv.FormatInt(n, 10) + " B"
	}
	s := strconv.FormatFloat(float64(n)/float64(unit), 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + name
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isIdent(s string) bool {
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
