package bind

import (
	"os/exec"
	"slices"
	"testing"

	"github.com/mq-hpc/mq/internal/placeholder/capacity"
	"github.com/mq-hpc/mq/internal/resource"
	"golang.org/x/sys/unix"
)

func lookup(env []string, key string) (string, int) {
	val, n := "", 0
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			val = kv[len(key)+1:]
			n++
		}
	}
	return val, n
}

func TestEnv(t *testing.T) {
	// The GPU ids are declared by the test: this machine has no GPU.
	p, err := resource.NewPool(resource.Capacity{CPUs: 8, GPUIDs: []string{"0", "1", "2", "3"}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := p.Take(resource.Request{CPUs: 2, GPUs: 2})
	b, _ := p.Take(resource.Request{CPUs: 4, GPUs: 1})
	c, _ := p.Take(resource.Request{})

	envA := Env(a, []string{"X=1", "CUDA_VISIBLE_DEVICES=0,1,2,3"})
	envB := Env(b, []string{"OMP_NUM_THREADS=1", "MQ_CPUS=99"})
	envC := Env(c, nil)
	for _, tt := range []struct {
		env       []string
		key, want string
	}{
		{envA, "X", "1"},
		{envA, "CUDA_VISIBLE_DEVICES", "0,1"},
		{envA, "ROCR_VISIBLE_DEVICES", "0,1"},
		{envA, "MQ_CPUS", "2"},
		{envA, "OMP_NUM_THREADS", "2"},
		{envB, "CUDA_VISIBLE_DEVICES", "2"},
		{envB, "MQ_CPUS", "4"},
		{envB, "OMP_NUM_THREADS", "1"}, // the job's own
		{envC, "CUDA_VISIBLE_DEVICES", ""},
		{envC, "ROCR_VISIBLE_DEVICES", ""},
		{envC, "MQ_CPUS", "1"},
	} {
		got, n := lookup(tt.env, tt.key)
		if n != 1 || got != tt.want {
			t.Errorf("%s = %q (%d times) in %q; want %q once", tt.key, got, n, tt.env, tt.want)
		}
	}

	// A placeholder without GPUs leaves the GPU variables alone.
	q, _ := resource.NewPool(resource.Capacity{CPUs: 2})
	d, _ := q.Take(resource.Request{CPUs: 2})
	envD := Env(d, []string{"CUDA_VISIBLE_DEVICES=7"})
	if got, n := lookup(envD, "CUDA_VISIBLE_DEVICES"); got != "7" || n != 1 {
		t.Errorf("no-GPU placeholder changed CUDA_VISIBLE_DEVICES to %q", got)
	}
	if _, n := lookup(envD, "ROCR_VISIBLE_DEVICES"); n != 0 {
		t.Errorf("no-GPU placeholder set ROCR_VISIBLE_DEVICES")
	}
}

func TestPin(t *testing.T) {
	own, err := capacity.Affinity()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep:", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	want := own[len(own)-1:] // the last core the test may use
	if err := Pin(cmd.Process.Pid, want); err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(cmd.Process.Pid, &set); err != nil {
		t.Fatal(err)
	}
	var got []int
	for i := range len(set) * 64 {
		if set.IsSet(i) {
			got = append(got, i)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("child's cores %v; want %v", got, want)
	}
	if err := Pin(cmd.Process.Pid, nil); err != nil {
		t.Errorf("Pin with no cores: %v", err)
	}
}
