package placeholder

import (
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/capacity"
	"github.com/mq-hpc/mq/internal/placeholder/memlimit"
	"github.com/mq-hpc/mq/internal/placeholder/memlimit/memhog"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// startAgentWith runs an agent with cfg (its Dial, site, host and
// OutDir filled in) until the test ends, and returns its OutDir.
func startAgentWith(t *testing.T, c *cls, cfg Config) string {
	t.Helper()
	cfg.Dial, cfg.Site, cfg.Host, cfg.OutDir = c.dial, "test", "h", t.TempDir()
	startAgentCfg(t, c, cfg)
	return cfg.OutDir
}

// newGrantingCLS is a CLS that grants each job what its target names
// (grantByTarget).
func newGrantingCLS(t *testing.T) *cls {
	t.Helper()
	c := newCLS(t)
	c.grant = grantByTarget(t)
	return c
}

// grantByTarget grants each job what its target names: "cpus2",
// "cpus1-gpus2", "mem64M", "cores1" (core id 1 named by the CLS),
// "none" (no grant).
func grantByTarget(t *testing.T) func(protocol.Assignment) *protocol.Capacity {
	return func(asg protocol.Assignment) *protocol.Capacity {
		if asg.Target == "none" {
			return nil
		}
		g := &protocol.Capacity{CPUs: 1}
		for _, kv := range strings.Split(asg.Target, "-") {
			i := strings.IndexAny(kv, "0123456789")
			k, v := kv[:i], kv[i:]
			switch k {
			case "cpus":
				g.CPUs, _ = strconv.Atoi(v)
			case "gpus":
				g.GPUs, _ = strconv.Atoi(v)
			case "mem":
				n, err := resource.ParseMem(v)
				if err != nil {
					t.Error(err)
				}
				g.Mem = n
			case "cores":
				id, _ := strconv.Atoi(v)
				g.CoreIDs = []int{id}
			}
		}
		return g
	}
}

func stdoutOf(t *testing.T, out string, id int64) string {
	t.Helper()
	p, _ := job.OutputPaths(out, id, 1)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("job %d: %v", id, err)
	}
	return string(b)
}

// TestAgentMemoryGrant: a job that allocates past its memory grant is
// killed, ends failed with the memory reason, and its sibling on the
// same placeholder finishes. The agent's RSS watchdog enforces it (the
// cgroup limiter needs a writable cgroup v2, which this machine may not
// give; TestCgroupLimiter* cover it where it does). The hog is the
// shell's child, killed unreaped: the usage reported is what the watch
// saw, not the shell's own rusage.
func TestAgentMemoryGrant(t *testing.T) {
	t.Parallel()
	c := newGrantingCLS(t)
	dir := t.TempDir()
	hog := protocol.JobSpec{Target: "mem64M", Cwd: dir, Command: "true; " + shellQuote(os.Args[0]) + " -test.run=^TestHelperMemHog$",
		Env: map[string]string{"MQ_TEST_HOG_MIB": "400"}}
	sibling := protocol.JobSpec{Target: "mem256M", Cwd: dir, Command: "sleep 1; echo still here"}
	ids := c.submit(hog, sibling)
	out := startAgentWith(t, c, Config{Capacity: resource.Capacity{CPUs: 2, Mem: resource.GiB},
		MemLimiter: &memlimit.Watchdog{Interval: 20 * time.Millisecond, Grace: 500 * time.Millisecond}})
	ends := c.wait(ids...)
	h, s := ends[ids[0]], ends[ids[1]]
	if h.State != "F" || !protocol.IsMemoryReason(h.Reason) || !strings.Contains(h.Reason, "over its request of 64 MiB") {
		t.Errorf("hog ended %s with reason %q; want F, killed over its request of 64 MiB", h.State, h.Reason)
	}
	if h.Usage == nil || h.Usage.MaxRSS <= 64<<20 {
		t.Errorf("hog's usage %+v; want its max RSS over the 64 MiB it was killed past", h.Usage)
	}
	if s.State != "D" || strings.TrimSpace(stdoutOf(t, out, ids[1])) != "still here" {
		t.Errorf("sibling ended %+v; want D", s)
	}
}

// TestHelperMemHog is not a test: TestAgentMemoryGrant's job runs it as
// its memory hog (memhog).
func TestHelperMemHog(t *testing.T) { memhog.Run() }

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestAgentBindsGrants: each job sees what it was granted. The GPUs are
// declared by the test (this machine has none): four, two per job, and
// the jobs that overlap see disjoint ones; a job granted none on a
// placeholder with GPUs sees none; a job granted core 1 runs on it alone.
func TestAgentBindsGrants(t *testing.T) {
	t.Parallel()
	cores, err := capacity.Affinity()
	if err != nil || len(cores) < 2 {
		t.Skipf("needs two cores to pin to: %v, %v", cores, err)
	}
	cores = cores[:2]
	c := newGrantingCLS(t)
	dir := t.TempDir()
	show := `sleep 0.5; echo "cuda=$CUDA_VISIBLE_DEVICES rocr=$ROCR_VISIBLE_DEVICES cpus=$MQ_CPUS omp=$OMP_NUM_THREADS"; grep Cpus_allowed_list /proc/self/status`
	ids := c.submit(
		protocol.JobSpec{Target: "cpus1-gpus2", Cwd: dir, Command: show},
		protocol.JobSpec{Target: "cpus1-gpus2", Cwd: dir, Command: show},
		protocol.JobSpec{Target: "none", Cwd: dir, Command: show},
	)
	out := startAgentWith(t, c, Config{Capacity: resource.Capacity{CPUs: 2, CoreIDs: cores, GPUIDs: []string{"0", "1", "2", "3"}}})
	ends := c.wait(ids...)
	var gpus []string
	for i, id := range ids {
		if ends[id].State != "D" {
			t.Fatalf("job %d ended %+v", id, ends[id])
		}
		got := stdoutOf(t, out, id)
		switch i {
		case 0, 1:
			f := strings.Fields(got)
			cuda := strings.TrimPrefix(f[0], "cuda=")
			if strings.Count(cuda, ",") != 1 || f[1] != "rocr="+cuda || f[2] != "cpus=1" || f[3] != "omp=1" {
				t.Errorf("job %d saw %q; want two GPUs, both variables, 1 cpu", id, got)
			}
			gpus = append(gpus, strings.Split(cuda, ",")...)
		case 2:
			if !strings.HasPrefix(got, "cuda= rocr= ") {
				t.Errorf("job without a grant saw %q; want no GPU", got)
			}
		}
	}
	sort.Strings(gpus)
	if !slices.Equal(gpus, []string{"0", "1", "2", "3"}) {
		t.Errorf("the two GPU jobs saw GPUs %v; want 0-3, each once", gpus)
	}

	// Alone on its placeholder, a job granted the core the CLS named runs
	// on it, and keeps its own OMP_NUM_THREADS.
	c2 := newGrantingCLS(t)
	id := c2.submit(protocol.JobSpec{Target: "cores" + strconv.Itoa(cores[1]), Cwd: dir, Command: show, Env: map[string]string{"OMP_NUM_THREADS": "7"}})[0]
	out = startAgentWith(t, c2, Config{Capacity: resource.Capacity{CPUs: 2, CoreIDs: cores}})
	if e := c2.wait(id)[id]; e.State != "D" {
		t.Fatalf("pinned job ended %+v", e)
	}
	if got := stdoutOf(t, out, id); !strings.Contains(got, "cpus=1 omp=7") || !strings.Contains(got, "Cpus_allowed_list:\t"+strconv.Itoa(cores[1])+"\n") {
		t.Errorf("job granted core %d saw %q; want pinned to it, its own OMP_NUM_THREADS", cores[1], got)
	}
}

// TestAgentCountsCores: jobs granted 2 cores each on a placeholder of 4
// run two at a time, never three, shown from their own start and end
// stamps; a job granted more than the placeholder holds fails at once.
func TestAgentCountsCores(t *testing.T) {
	t.Parallel()
	c := newGrantingCLS(t)
	dir := t.TempDir()
	stamp := `date +%s%N > "$MQ_JOB_ID.start"; sleep 0.4; date +%s%N > "$MQ_JOB_ID.end"`
	ids := c.submit(append(slices.Repeat([]protocol.JobSpec{{Target: "cpus2", Cwd: dir, Command: stamp}}, 6),
		protocol.JobSpec{Target: "cpus8", Cwd: dir, Command: "true"})...)
	startAgentWith(t, c, Config{Capacity: resource.Capacity{CPUs: 4}})
	ends := c.wait(ids...)
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, id := range ids[:6] {
		if ends[id].State != "D" {
			t.Fatalf("job %d ended %+v", id, ends[id])
		}
		for _, f := range []struct {
			suffix string
			delta  int
		}{{".start", 1}, {".end", -1}} {
			b, err := os.ReadFile(dir + "/" + strconv.FormatInt(id, 10) + f.suffix)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			edges = append(edges, edge{n, f.delta})
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].at < edges[j].at || edges[i].at == edges[j].at && edges[i].delta < edges[j].delta
	})
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	if most != 2 {
		t.Errorf("at most %d jobs of 2 cores ran at once on 4 cores; want 2", most)
	}
	big := ends[ids[6]]
	if big.State != "F" || !strings.Contains(big.Reason, "more than this placeholder holds") {
		t.Errorf("a job granted 8 cores of 4 ended %s %q; want failed, saying so", big.State, big.Reason)
	}
}

// TestAgentRegistersCapacity: the agent tells the CLS what it offers,
// what its site asked and why they differ, and with each request for
// work what it has free; the CLS takes the registration.
func TestAgentRegistersCapacity(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	regs := make(chan protocol.Register, 4)
	c.srv.OnPlaceholder = func(_ int64, reg protocol.Register, connected bool) {
		if connected {
			regs <- reg
		}
	}
	dir := t.TempDir()
	id := c.submit(protocol.JobSpec{Target: "t", Cwd: dir, Command: "true"})[0]
	startAgentWith(t, c, Config{
		Capacity:     resource.Capacity{CPUs: 2, Mem: resource.GiB, GPUIDs: []string{"0", "1"}, Named: map[string]int{"lic": 1}},
		Asked:        resource.Capacity{CPUs: 4, Mem: resource.GiB, GPUIDs: []string{"0", "1"}, Named: map[string]int{"lic": 1}},
		CapacityNote: "asked 4 cpus, given 2 (NSLOTS)",
	})
	var reg protocol.Register
	select {
	case reg = <-regs:
	case <-time.After(time.Minute):
		t.Fatal("the agent did not register")
	}
	if reg.Capacity == nil || reg.Capacity.String() != "cpus=2 mem=1 GiB gpus=0,1 lic=1" || reg.Slots != 2 {
		t.Errorf("registered capacity %v, slots %d; want cpus=2 mem=1 GiB gpus=0,1 lic=1, 2 slots", reg.Capacity, reg.Slots)
	}
	if reg.Asked == nil || reg.Asked.CPUs != 4 || reg.CapacityNote != "asked 4 cpus, given 2 (NSLOTS)" {
		t.Errorf("registered asked %v, note %q", reg.Asked, reg.CapacityNote)
	}
	if e := c.wait(id)[id]; e.State != "D" {
		t.Errorf("job ended %+v", e)
	}
	if n := c.count(available, false); n == 0 {
		t.Error("no next request said what the placeholder has free")
	}
}
