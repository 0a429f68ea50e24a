package capacity

import (
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

// FuzzDetect: what a host says it gave a placeholder (the batch system's
// variables, cgroup files, /proc) is whatever its cluster or user set.
// Whatever it holds, Detect does not panic, gives at least one core and
// no negative memory, and a figure it takes from a source is what that
// source says, never a product that overflowed; and the cores and
// memory Advertise then offers are either refused by the agent itself at
// its start (the one line it exits with) or taken by the CLS.
func FuzzDetect(f *testing.F) {
	root := fakeRoot()
	for _, s := range []struct{ env, cgroup, cpuMax, memMax, meminfo string }{
		{"", "0::/user.slice/job42\n", "max 100000\n", "max\n", string(root["proc/meminfo"].Data)},
		{"SLURM_CPUS_ON_NODE=4\nSLURM_MEM_PER_NODE=8192\nSLURM_JOB_GPUS=2,3", "0::/job\n", "150000 100000\n", "1073741824\n", "MemTotal: 1000 kB\n"},
		{"SLURM_CPUS_ON_NODE=4\nSLURM_MEM_PER_CPU=1000\nCUDA_VISIBLE_DEVICES=0,1", "", "", "", ""},
		{"PBS_JOBID=12.pbs\nNCPUS=2\nPBS_VMEM=4gb", "0::/\n", "", "", ""},
		{"PBS_NCPUS=3\nPBS_MEM=2048mb\nNSLOTS=6", "", "", "", ""},
		{"CUDA_VISIBLE_DEVICES=NoDevFiles\nSLURM_JOB_GPUS=GPU-5c3f,MIG-1", "0::/a/../b\n", "1 3\n", "", ""},
		{"SLURM_MEM_PER_NODE=17592186044417", "", "", "", ""},
		{"SLURM_CPUS_ON_NODE=4\nSLURM_MEM_PER_CPU=4398046511105", "", "", "", ""},
		{"NSLOTS=2", "", "", "", "MemTotal: 18014398509481985 kB\n"},
	} {
		f.Add(s.env, s.cgroup, s.cpuMax, s.memMax, s.meminfo, string(root["proc/cpuinfo"].Data), []byte{0, 1, 2, 3}, 2, int64(resource.GiB))
	}
	f.Fuzz(func(t *testing.T, envText, cgroup, cpuMax, memMax, meminfo, cpuinfo string, cores []byte, askedCPUs int, askedMem int64) {
		env := map[string]string{}
		for _, line := range strings.Split(envText, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		fsys := fstest.MapFS{}
		for name, data := range map[string]string{"proc/self/cgroup": cgroup, "sys/fs/cgroup/cpu.max": cpuMax,
			"sys/fs/cgroup/memory.max": memMax, "proc/meminfo": meminfo, "proc/cpuinfo": cpuinfo} {
			if data != "" {
				fsys[name] = &fstest.MapFile{Data: []byte(data)}
			}
		}
		var ids []int // a CPU set, as the kernel gives it: ascending, no repeats
		for _, c := range cores {
			ids = append(ids, int(c))
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		g := Detect(envOf(env), fsys, func() ([]int, error) { return ids, nil })
		if g.CPUs < 1 || g.Mem < 0 || (g.CoreIDs != nil && len(g.CoreIDs) != g.CPUs) {
			t.Fatalf("Detect: %+v", g)
		}
		// A memory figure is exactly its source's.
		envInt := func(name string) *big.Int {
			n, err := strconv.Atoi(strings.TrimSpace(env[name]))
			if err != nil {
				return big.NewInt(0)
			}
			return big.NewInt(int64(n))
		}
		var want *big.Int
		switch g.MemFrom {
		case "SLURM_MEM_PER_NODE":
			want = new(big.Int).Mul(envInt("SLURM_MEM_PER_NODE"), big.NewInt(resource.MiB))
		case "SLURM_MEM_PER_CPU":
			want = new(big.Int).Mul(envInt("SLURM_MEM_PER_CPU"), big.NewInt(resource.MiB))
			want.Mul(want, envInt("SLURM_CPUS_ON_NODE"))
		case "/proc/meminfo":
			for _, line := range strings.Split(meminfo, "\n") {
				if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
					if f := strings.Fields(rest); len(f) > 0 {
						if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
							want = new(big.Int).Mul(big.NewInt(n), big.NewInt(resource.KiB))
							break
						}
					}
				}
			}
		}
		if want != nil && (!want.IsInt64() || want.Int64() != g.Mem) {
			t.Fatalf("memory %d from %s, which says %v", g.Mem, g.MemFrom, want)
		}
		if g.CPUsFrom == "cgroup cpu.max" {
			f := strings.Fields(cpuMax)
			quota, _ := strconv.ParseFloat(f[0], 64)
			period, _ := strconv.ParseFloat(f[1], 64)
			if cores := quota / period; float64(g.CPUs) < cores || float64(g.CPUs) >= cores+1 || math.IsInf(cores, 0) {
				t.Fatalf("%d cpus from cpu.max %q", g.CPUs, cpuMax)
			}
		}
		asked := resource.Capacity{CPUs: max(askedCPUs%64, 1), Mem: max(askedMem, 0)}
		offered, note := Advertise(asked, g)
		if strings.ContainsAny(note, "\n\r") {
			t.Fatalf("note %q, want one line", note)
		}
		// GPU ids are offered as the variables name them: the CLS judges
		// them, and refuses a bad one at registration (the agent exits
		// with that line). They are never made up.
		named, _ := deviceList(env["CUDA_VISIBLE_DEVICES"])
		if g.GPUsFrom == "SLURM_JOB_GPUS" {
			named, _ = deviceList(env["SLURM_JOB_GPUS"])
		}
		if !slices.Equal(offered.GPUIDs, named) {
			t.Fatalf("GPUs %q offered, %q named", offered.GPUIDs, named)
		}
		if offered.Validate() != nil {
			return // the agent says so and exits before it connects
		}
		// What the agent computes itself, the CLS takes.
		c := protocol.Capacity{CPUs: offered.CPUs, CoreIDs: offered.CoreIDs, Mem: offered.Mem}
		if err := protocol.CheckCapacity("capacity", c); err != nil {
			t.Fatalf("the agent would offer %v, which the CLS refuses: %v", offered, err)
		}
	})
}
