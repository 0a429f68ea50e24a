// Package bind gives a job what a placeholder granted it: the
// environment that names its CPUs and GPUs, and its cores' affinity.
package bind

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/internal/resource"
	"golang.org/x/sys/unix"
)

// Env returns jobEnv (the job's own variables, KEY=VALUE) with what
// the job was granted added: MQ_CPUS, OMP_NUM_THREADS unless the job
// sets it, and, on a placeholder with GPUs, CUDA_VISIBLE_DEVICES and
// ROCR_VISIBLE_DEVICES naming the job's GPUs only (empty when it has
// none, which hides them all). The GPU variables replace the job's own:
// a job may not name GPUs it was not given.
func Env(g resource.Grant, jobEnv []string) []string {
	env := make([]string, 0, len(jobEnv)+4)
	hasOMP := false
	gpus := g.PoolHasGPUs()
	for _, kv := range jobEnv {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "OMP_NUM_THREADS":
			hasOMP = true
		case "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES":
			if gpus {
				continue
			}
		case "MQ_CPUS":
			continue
		}
		env = append(env, kv)
	}
	n := strconv.Itoa(g.CPUs)
	env = append(env, "MQ_CPUS="+n)
	if !hasOMP {
		env = append(env, "OMP_NUM_THREADS="+n)
	}
	if gpus {
		ids := strings.Join(g.GPUs(), ",")
		env = append(env, "CUDA_VISIBLE_DEVICES="+ids, "ROCR_VISIBLE_DEVICES="+ids)
	}
	return env
}

// Pin restricts a started process, every thread it has by now, to the
// given cores (sched_setaffinity). Threads and children it starts later
// inherit the set; a child forked between the process's start and Pin
// does not, which the agent makes unlikely by pinning straight after
// Start.
func Pin(pid int, cores []int) error {
	if len(cores) == 0 {
		return nil
	}
	var set unix.CPUSet
	for _, c := range cores {
		set.Set(c)
	}
	tids := []int{pid}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid)); err == nil {
		tids = tids[:0]
		for _, e := range ents {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				tids = append(tids, tid)
			}
		}
	}
	for _, tid := range tids {
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pin %d to cores %v: %w", pid, cores, err)
		}
	}
	return nil
}

// Environ is the environment of a job that runs with grant g: the
// agent's own without the variables the grant sets (the job's own
// OMP_NUM_THREADS is kept, the agent's is not), then the job's with
// Env's added.
func Environ(g resource.Grant, jobEnv []string) []string {
	base := os.Environ()
	env := make([]string, 0, len(base)+len(jobEnv)+4)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "OMP_NUM_THREADS", "MQ_CPUS":
			continue
		case "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES":
			if g.PoolHasGPUs() {
				continue
			}
		}
		env = append(env, kv)
	}
	return append(env, Env(g, jobEnv)...)
}
