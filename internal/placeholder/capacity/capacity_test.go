package capacity

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mq-hpc/mq/internal/resource"
)

// A machine of 8 processors and 32 GiB, as /proc shows it, with a
// cgroup v2 hierarchy the tests add limits to.
func fakeRoot() fstest.MapFS {
	var cpuinfo strings.Builder
	for i := range 8 {
		cpuinfo.WriteString("processor\t: " + string(rune('0'+i)) + "\nmodel name\t: test\n\n")
	}
	return fstest.MapFS{
		"proc/cpuinfo":          {Data: []byte(cpuinfo.String())},
		"proc/meminfo":          {Data: []byte("MemTotal:       33554432 kB\nMemFree:         1000 kB\n")},
		"proc/self/cgroup":      {Data: []byte("0::/user.slice/job42\n")},
		"sys/fs/cgroup/cpu.max": {Data: []byte("max 100000\n")},
		"sys/fs/cgroup/user.slice/job42/memory.max": {Data: []byte("max\n")},
	}
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDetect(t *testing.T) {
	affinity8 := func() ([]int, error) { return []int{0, 1, 2, 3, 4, 5, 6, 7}, nil }
	affinity4 := func() ([]int, error) { return []int{4, 5, 6, 7}, nil }
	tests := []struct {
		name     string
		env      map[string]string
		files    map[string]string
		affinity func() ([]int, error)
		cpus     int
		cpusFrom string
		mem      int64
		memFrom  string
		cores    []int
		gpus     []string
	}{
		{name: "bare machine", affinity: affinity8,
			cpus: 8, cpusFrom: "CPU affinity", mem: 32 * resource.GiB, memFrom: "/proc/meminfo", cores: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{name: "no affinity", cpus: 8, cpusFrom: "/proc/cpuinfo", mem: 32 * resource.GiB, memFrom: "/proc/meminfo"},
		{name: "slurm",
			env:      map[string]string{"SLURM_CPUS_ON_NODE": "4", "SLURM_MEM_PER_NODE": "8192", "SLURM_JOB_GPUS": "2,3"},
			affinity: affinity4,
			cpus:     4, cpusFrom: "SLURM_CPUS_ON_NODE", mem: 8 * resource.GiB, memFrom: "SLURM_MEM_PER_NODE", cores: []int{4, 5, 6, 7}, gpus: []string{"2", "3"}},
		{name: "slurm mem per cpu, constrained GPUs",
			env:      map[string]string{"SLURM_CPUS_ON_NODE": "4", "SLURM_MEM_PER_CPU": "1000", "SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"},
			affinity: affinity8,
			cpus:     4, cpusFrom: "SLURM_CPUS_ON_NODE", mem: 4000 * resource.MiB, memFrom: "SLURM_MEM_PER_CPU", gpus: []string{"0", "1"}},
		{name: "openpbs",
			env:  map[string]string{"PBS_JOBID": "12.pbs", "NCPUS": "2", "PBS_VMEM": "4gb"},
			cpus: 2, cpusFrom: "NCPUS", mem: 4 * resource.GiB, memFrom: "PBS_VMEM"},
		{name: "torque",
			env:  map[string]string{"PBS_NCPUS": "3", "PBS_MEM": "2048mb"},
			cpus: 3, cpusFrom: "PBS_NCPUS", mem: 2 * resource.GiB, memFrom: "PBS_MEM"},
		{name: "NCPUS outside PBS is ignored",
			env:  map[string]string{"NCPUS": "2"},
			cpus: 8, cpusFrom: "/proc/cpuinfo", mem: 32 * resource.GiB, memFrom: "/proc/meminfo"},
		{name: "sge",
			env:  map[string]string{"NSLOTS": "6"},
			cpus: 6, cpusFrom: "NSLOTS", mem: 32 * resource.GiB, memFrom: "/proc/meminfo"},
		{name: "sge unbound: cores counted, not pinned",
			env: map[string]string{"NSLOTS": "6"}, affinity: affinity8,
			cpus: 6, cpusFrom: "NSLOTS", mem: 32 * resource.GiB, memFrom: "/proc/meminfo"},
		{name: "cgroup v2",
			files: map[string]string{
				"sys/fs/cgroup/user.slice/cpu.max":          "150000 100000\n",
				"sys/fs/cgroup/user.slice/job42/memory.max": "1073741824\n",
			},
			affinity: affinity8,
			cpus:     2, cpusFrom: "cgroup cpu.max", mem: resource.GiB, memFrom: "cgroup memory.max"},
		{name: "cgroup tighter than slurm",
			env:   map[string]string{"SLURM_CPUS_ON_NODE": "4", "SLURM_MEM_PER_NODE": "8192"},
			files: map[string]string{"sys/fs/cgroup/user.slice/job42/memory.max": "2147483648\n"},
			cpus:  4, cpusFrom: "SLURM_CPUS_ON_NODE", mem: 2 * resource.GiB, memFrom: "cgroup memory.max"},
		// A figure whose product with its unit overflows is no limit: it
		// wrapped to 1 MiB, 4 MiB and 1 KiB.
		{name: "slurm mem per node overflows",
			env:  map[string]string{"SLURM_MEM_PER_NODE": "17592186044417"},
			cpus: 8, cpusFrom: "/proc/cpuinfo", mem: 32 * resource.GiB, memFrom: "/proc/meminfo"},
		{name: "slurm mem per cpu overflows",
			env:  map[string]string{"SLURM_CPUS_ON_NODE": "4", "SLURM_MEM_PER_CPU": "4398046511105"},
			cpus: 4, cpusFrom: "SLURM_CPUS_ON_NODE", mem: 32 * resource.GiB, memFrom: "/proc/meminfo"},
		{name: "meminfo overflows",
			env:   map[string]string{"NSLOTS": "2"},
			files: map[string]string{"proc/meminfo": "MemTotal: 18014398509481985 kB\n"},
			cpus:  2, cpusFrom: "NSLOTS"},
		{name: "no GPUs said",
			env:  map[string]string{"CUDA_VISIBLE_DEVICES": "NoDevFiles"},
			cpus: 8, cpusFrom: "/proc/cpuinfo", mem: 32 * resource.GiB, memFrom: "/proc/meminfo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fakeRoot()
			for name, data := range tt.files {
				fsys[name] = &fstest.MapFile{Data: []byte(data)}
			}
			g := Detect(envOf(tt.env), fsys, tt.affinity)
			if g.CPUs != tt.cpus || g.CPUsFrom != tt.cpusFrom {
				t.Errorf("cpus %d from %q; want %d from %q", g.CPUs, g.CPUsFrom, tt.cpus, tt.cpusFrom)
			}
			if g.Mem != tt.mem || g.MemFrom != tt.memFrom {
				t.Errorf("mem %s from %q; want %s from %q", resource.FormatMem(g.Mem), g.MemFrom, resource.FormatMem(tt.mem), tt.memFrom)
			}
			if !slices.Equal(g.CoreIDs, tt.cores) {
				t.Errorf("cores %v; want %v", g.CoreIDs, tt.cores)
			}
			if !slices.Equal(g.GPUIDs, tt.gpus) {
				t.Errorf("GPUs %v; want %v", g.GPUIDs, tt.gpus)
			}
			if err := g.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestDetectEmptyFS(t *testing.T) {
	g := Detect(envOf(nil), fstest.MapFS{}, nil)
	if g.CPUs != 1 || g.Mem != 0 || g.MemFrom != "" {
		t.Errorf("nothing known: %+v; want 1 cpu, memory unknown", g)
	}
}

func TestAdvertise(t *testing.T) {
	given := Given{
		Capacity: resource.Capacity{CPUs: 4, CoreIDs: []int{4, 5, 6, 7}, Mem: 8 * resource.GiB, GPUIDs: []string{"0", "1"}},
		CPUsFrom: "SLURM_CPUS_ON_NODE", MemFrom: "SLURM_MEM_PER_NODE", GPUsFrom: "CUDA_VISIBLE_DEVICES",
	}
	c, note := Advertise(resource.Capacity{CPUs: 4, Mem: 8 * resource.GiB, GPUIDs: []string{"0", "1"}}, given)
	if note != "" || c.CPUs != 4 || c.Mem != 8*resource.GiB || len(c.GPUIDs) != 2 || len(c.CoreIDs) != 4 {
		t.Errorf("as asked: %v, %q", c, note)
	}
	c, note = Advertise(resource.Capacity{CPUs: 16, Mem: 4 * resource.GiB, GPUIDs: []string{"0", "1", "2", "3"}}, given)
	if c.CPUs != 4 || c.Mem != 4*resource.GiB || !slices.Equal(c.GPUIDs, []string{"0", "1"}) {
		t.Errorf("smaller of each: %v", c)
	}
	for _, want := range []string{"asked 16 cpus, given 4 (SLURM_CPUS_ON_NODE)", "asked 4 GiB, given 8 GiB (SLURM_MEM_PER_NODE)", "asked 4 GPUs, given 2 (CUDA_VISIBLE_DEVICES)"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	c, _ = Advertise(resource.Capacity{CPUs: 2}, given)
	if c.CPUs != 2 || !slices.Equal(c.CoreIDs, []int{4, 5}) {
		t.Errorf("fewer cpus asked: %v", c)
	}
	// A local placeholder told it has GPUs no variable names (the
	// end-to-end test's fake GPUs) keeps them; memory not detected is as asked.
	c, note = Advertise(resource.Capacity{CPUs: 2, Mem: resource.GiB, GPUIDs: []string{"0", "1", "2", "3"}}, Given{Capacity: resource.Capacity{CPUs: 2}, CPUsFrom: "CPU affinity"})
	if note != "" || len(c.GPUIDs) != 4 || c.Mem != resource.GiB {
		t.Errorf("undetected GPUs and memory: %v, %q", c, note)
	}
}

// TestAdvertiseOversubscribed: cores the machine alone counts do not
// cap the cores asked (a local placeholder of 16 slots on 2 cores runs
// 16 jobs, as before resources), but the note says so and no job is
// pinned; a batch system's count does cap them.
func TestAdvertiseOversubscribed(t *testing.T) {
	for _, from := range []string{"CPU affinity", "/proc/cpuinfo"} {
		c, note := Advertise(resource.Capacity{CPUs: 16}, Given{Capacity: resource.Capacity{CPUs: 2, CoreIDs: []int{0, 1}}, CPUsFrom: from})
		if c.CPUs != 16 || c.CoreIDs != nil || !strings.Contains(note, "asked 16 cpus, the machine has 2 ("+from+")") {
			t.Errorf("from %s: %v, %q; want 16 cpus, unpinned, noted", from, c, note)
		}
	}
	c, _ := Advertise(resource.Capacity{CPUs: 16}, Given{Capacity: resource.Capacity{CPUs: 2}, CPUsFrom: "NSLOTS"})
	if c.CPUs != 2 {
		t.Errorf("NSLOTS=2 for 16 asked: %d cpus; want 2", c.CPUs)
	}
	c, note := Advertise(resource.Capacity{CPUs: 2}, Given{Capacity: resource.Capacity{CPUs: 8, CoreIDs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, CPUsFrom: "CPU affinity"})
	if c.CPUs != 2 || c.CoreIDs != nil || note != "" {
		t.Errorf("2 of the machine's 8 cores: %v, %q; want 2, not pinned (other placeholders share the machine), nothing to say", c, note)
	}
	c, note = Advertise(resource.Capacity{CPUs: 1, Mem: 4 * resource.GiB}, Given{Capacity: resource.Capacity{CPUs: 8, Mem: 32 * resource.GiB}, CPUsFrom: "CPU affinity", MemFrom: "/proc/meminfo"})
	if c.Mem != 4*resource.GiB || note != "" {
		t.Errorf("4 GiB of the machine's 32: %v, %q; want 4 GiB, nothing to say", c, note)
	}
	c, note = Advertise(resource.Capacity{CPUs: 1, Mem: 64 * resource.GiB}, Given{Capacity: resource.Capacity{CPUs: 8, Mem: 32 * resource.GiB}, CPUsFrom: "CPU affinity", MemFrom: "/proc/meminfo"})
	if c.Mem != 32*resource.GiB || !strings.Contains(note, "asked 64 GiB, given 32 GiB (/proc/meminfo)") {
		t.Errorf("64 GiB on a machine of 32: %v, %q", c, note)
	}
}

func TestAffinityReal(t *testing.T) {
	ids, err := Affinity()
	if err != nil || len(ids) == 0 {
		t.Fatalf("Affinity() = %v, %v", ids, err)
	}
}
