// Package capacity is what a host gives a placeholder: the cores, memory
// and GPUs its batch system, cgroup, CPU affinity and /proc say it was
// given (Detect), and what it offers its jobs of what it asked for
// (Advertise). The agent asks at its start; the CLS asks for its own
// local placeholders' share of this machine.
package capacity

import (
	"bufio"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/internal/resource"
	"golang.org/x/sys/unix"
)

// Given is what the placeholder was really given, and where each figure
// came from ("" when nothing said: memory and GPUs are then unknown, not
// zero).
type Given struct {
	resource.Capacity
	CPUsFrom, MemFrom, GPUsFrom string
}

// Affinity returns the ids of the cores the calling process may run on
// (sched_getaffinity).
func Affinity() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var ids []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			ids = append(ids, i)
		}
	}
	return ids, nil
}

// Detect reads what the agent was given: the batch system's
// environment (Slurm, PBS, SGE), its cgroup v2 limits, CUDA_VISIBLE_DEVICES,
// its CPU affinity, and /proc/cpuinfo and /proc/meminfo last. Each of
// cores and memory is the smallest that any source says, since every
// one of them is a limit the jobs will meet. fsys is rooted at "/";
// affinity may be nil.
func Detect(env func(string) string, fsys fs.FS, affinity func() ([]int, error)) Given {
	var g Given
	cpus := func(n int, from string) {
		if n > 0 && (g.CPUs == 0 || n < g.CPUs) {
			g.CPUs, g.CPUsFrom = n, from
		}
	}
	mem := func(n int64, from string) {
		if n > 0 && (g.Mem == 0 || n < g.Mem) {
			g.Mem, g.MemFrom = n, from
		}
	}
	envInt := func(name string) int {
		n, err := strconv.Atoi(strings.TrimSpace(env(name)))
		if err != nil {
			return 0
		}
		return n
	}

	// Slurm.
	cpus(envInt("SLURM_CPUS_ON_NODE"), "SLURM_CPUS_ON_NODE")
	mem(product(int64(envInt("SLURM_MEM_PER_NODE")), resource.MiB), "SLURM_MEM_PER_NODE")
	if per := int64(envInt("SLURM_MEM_PER_CPU")); per > 0 && g.CPUsFrom == "SLURM_CPUS_ON_NODE" {
		mem(product(product(per, resource.MiB), int64(g.CPUs)), "SLURM_MEM_PER_CPU")
	}
	// PBS (OpenPBS and Torque export the cores; memory only where a
	// site's hook does, as PBS_VMEM or PBS_MEM in PBS's own units).
	cpus(envInt("PBS_NCPUS"), "PBS_NCPUS")
	if env("PBS_JOBID") != "" || env("PBS_ENVIRONMENT") != "" {
		cpus(envInt("NCPUS"), "NCPUS")
	}
	for _, name := range []string{"PBS_VMEM", "PBS_MEM"} {
		if n, ok := parsePBSSize(env(name)); ok {
			mem(n, name)
		}
	}
	// SGE.
	cpus(envInt("NSLOTS"), "NSLOTS")

	// cgroup v2: this cgroup's limits and its ancestors'.
	if dir, ok := cgroupDir(fsys); ok {
		for d := dir; ; d = path.Dir(d) {
			if n, ok := cgroupCPUMax(fsys, d); ok {
				cpus(n, "cgroup cpu.max")
			}
			if b, err := fs.ReadFile(fsys, path.Join(d, "memory.max")); err == nil {
				if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
					mem(n, "cgroup memory.max")
				}
			}
			if d == "sys/fs/cgroup" {
				break
			}
		}
	}

	// GPUs: CUDA_VISIBLE_DEVICES names them as the jobs must (relative to
	// the devices a constraining cgroup leaves), so it comes first.
	if ids, ok := deviceList(env("CUDA_VISIBLE_DEVICES")); ok {
		g.GPUIDs, g.GPUsFrom = ids, "CUDA_VISIBLE_DEVICES"
	} else if ids, ok := deviceList(env("SLURM_JOB_GPUS")); ok {
		g.GPUIDs, g.GPUsFrom = ids, "SLURM_JOB_GPUS"
	}

	var cores []int
	if affinity != nil {
		if ids, err := affinity(); err == nil && len(ids) > 0 {
			cores = ids
			cpus(len(ids), "CPU affinity")
		}
	}
	if g.CPUs == 0 {
		cpus(countCPUInfo(fsys), "/proc/cpuinfo")
	}
	if g.Mem == 0 {
		mem(memTotal(fsys), "/proc/meminfo")
	}
	if g.CPUs == 0 {
		g.CPUs = 1
	}
	// Core ids are kept only when they are exactly the cores counted: a
	// batch system that gave 4 slots without binding leaves the agent on
	// every core, and pinning jobs to 4 of them would be a guess.
	if len(cores) == g.CPUs && len(cores) <= resource.MaxCoreIDs {
		g.CoreIDs = cores
	}
	return g
}

// Advertise returns the capacity to offer the CLS: the smaller of what
// the site asked for and what was given, in each dimension, and a note
// saying where they differ ("" when they agree). Memory and GPUs that
// were not detected are taken as asked. Cores counted from the machine
// alone (its CPU affinity, /proc/cpuinfo) do not cap the cores asked:
// no batch system or cgroup limits the placeholder, and more 1-core jobs
// than cores (`--slots 16` on a 4-core host, for jobs that wait on I/O)
// is the operator's choice; the note says so.
func Advertise(asked resource.Capacity, given Given) (resource.Capacity, string) {
	c := resource.Capacity{CPUs: given.CPUs, Mem: given.Mem, GPUIDs: given.GPUIDs, Named: asked.Named}
	var notes []string
	machine := given.CPUsFrom == "CPU affinity" || given.CPUsFrom == "/proc/cpuinfo"
	switch {
	case asked.CPUs <= 0:
	case machine && asked.CPUs > given.CPUs:
		notes = append(notes, fmt.Sprintf("asked %d cpus, the machine has %d (%s): jobs share them", asked.CPUs, given.CPUs, given.CPUsFrom))
		c.CPUs = asked.CPUs
	case machine:
		c.CPUs = asked.CPUs // a part of the machine, as asked: nothing to say
	default:
		if asked.CPUs != given.CPUs {
			notes = append(notes, fmt.Sprintf("asked %d cpus, given %d (%s)", asked.CPUs, given.CPUs, given.CPUsFrom))
		}
		c.CPUs = min(asked.CPUs, given.CPUs)
	}
	// Core ids are offered for pinning only when they are this
	// placeholder's own (a batch system's or cgroup's cpuset): the
	// machine's, when nothing narrowed them, are shared with every other
	// placeholder on it, and pinning each one's jobs to the same first
	// cores would be worse than not pinning.
	if len(given.CoreIDs) >= c.CPUs && !machine {
		c.CoreIDs = given.CoreIDs[:c.CPUs]
	}
	switch {
	case asked.Mem == 0:
	case given.MemFrom == "":
		c.Mem = asked.Mem
	default:
		// The machine's memory is not a grant: a part of it is no news.
		if asked.Mem != given.Mem && (given.MemFrom != "/proc/meminfo" || asked.Mem > given.Mem) {
			notes = append(notes, fmt.Sprintf("asked %s, given %s (%s)", resource.FormatMem(asked.Mem), resource.FormatMem(given.Mem), given.MemFrom))
		}
		c.Mem = min(asked.Mem, given.Mem)
	}
	switch {
	case given.GPUsFrom == "":
		c.GPUIDs = asked.GPUIDs
	case len(asked.GPUIDs) > 0:
		if len(asked.GPUIDs) != len(given.GPUIDs) {
			notes = append(notes, fmt.Sprintf("asked %d GPUs, given %d (%s)", len(asked.GPUIDs), len(given.GPUIDs), given.GPUsFrom))
		}
		c.GPUIDs = given.GPUIDs[:min(len(asked.GPUIDs), len(given.GPUIDs))]
	}
	return c, strings.Join(notes, "; ")
}

// cgroupDir returns the agent's cgroup v2 directory under fsys, from
// /proc/self/cgroup's "0::" line.
func cgroupDir(fsys fs.FS) (string, bool) {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return path.Join("sys/fs/cgroup", strings.TrimPrefix(path.Clean("/"+p), "/")), true
		}
	}
	return "", false
}

// cgroupCPUMax reads cpu.max ("QUOTA PERIOD" or "max PERIOD") as whole
// cores, rounded up.
func cgroupCPUMax(fsys fs.FS, dir string) (int, bool) {
	b, err := fs.ReadFile(fsys, path.Join(dir, "cpu.max"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	quota, err1 := strconv.ParseFloat(f[0], 64)
	period, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
		return 0, false
	}
	return int(math.Ceil(quota / period)), true
}

// deviceList parses a device list such as CUDA_VISIBLE_DEVICES; "",
// "NoDevFiles" and "-1" name none and are reported as not given, since
// then the batch system did not say what the machine has.
func deviceList(s string) ([]string, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s == "NoDevFiles" || strings.HasPrefix(s, "-1") {
		return nil, false
	}
	var ids []string
	for _, id := range strings.Split(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	return ids, len(ids) > 0
}

// parsePBSSize parses a PBS size: a number and b, kb, mb, gb or tb (any
// case; w for words is not used for memory here); a bare number is bytes.
func parsePBSSize(s string) (int64, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return 0, false
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kb", resource.KiB}, {"mb", resource.MiB}, {"gb", resource.GiB}, {"tb", resource.TiB}, {"b", 1}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = num, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, false
	}
	return n * mult, true
}

// product is a*b for positive a and b, else 0, and 0 when it does not fit
// an int64: a figure that overflows is no limit anyone set (multiplied
// through, it wrapped to a few MiB).
func product(a, b int64) int64 {
	if a <= 0 || b <= 0 || a > math.MaxInt64/b {
		return 0
	}
	return a * b
}

func countCPUInfo(fsys fs.FS) int {
	f, err := fsys.Open("proc/cpuinfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, _, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "processor" {
			n++
		}
	}
	return n
}

func memTotal(fsys fs.FS) int64 {
	b, err := fs.ReadFile(fsys, "proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return product(n, resource.KiB)
				}
			}
		}
	}
	return 0
}
