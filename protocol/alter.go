package protocol

import "fmt"

// Alter changes jobs that have not started (mqalter; Slurm's scontrol
// update, PBS's qalter): the Waiting, Queued and Held jobs its Select
// names. Each value given replaces the job's own; at least one must be.
// A job keeps its state: a held one stays held.
type Alter struct {
	Select
	// Priority, when set, is the job's new priority
	// (MinPriority..MaxPriority; 0 is the default).
	Priority *int `json:"priority,omitempty"`
	// Time, when more than 0, is the job's new time limit in seconds
	// (mqsub --time). The estimate follows it when the job has none, or
	// had the old limit as its own (mqsub --time without --est), unless
	// Est is given too.
	Time float64 `json:"time,omitempty"`
	// Est, when set, is the job's new expected runtime in seconds (0:
	// unknown).
	Est *float64 `json:"est,omitempty"`
	// Resources: the cores (a count or auto), memory (a size or auto),
	// GPUs and named amounts given replace the job's request of each;
	// what is not given stays.
	Resources
	// Drop names what the job no longer asks for: "gpus", or a named
	// resource (mqalter --gpus 0, --resource NAME=0).
	Drop []string `json:"drop,omitempty"`
}

// DropGPUs is the name Alter.Drop gives the GPU request.
const DropGPUs = "gpus"

// Check reports, in one line, what is wrong with a: nothing to change,
// or a value mqsub would refuse.
func (a Alter) Check() error {
	if a.Priority == nil && a.Time == 0 && a.Est == nil && !a.Resources.Asks() && len(a.Drop) == 0 {
		return fmt.Errorf("nothing to change: give a priority, time limit, estimate, cpus, memory, gpus or resources")
	}
	if a.Priority != nil {
		if err := CheckPriority(*a.Priority); err != nil {
			return err
		}
	}
	if a.Time != 0 && !(a.Time > 0 && a.Time <= MaxSeconds) {
		return fmt.Errorf("time limit %v must be more than 0 and at most %g seconds", a.Time, float64(MaxSeconds))
	}
	if a.Est != nil {
		if err := CheckSeconds("estimate", *a.Est); err != nil {
			return err
		}
	}
	if err := CheckResources(a.Resources); err != nil {
		return err
	}
	return a.checkDrop()
}

// checkDrop reports what is wrong with a.Drop: too many names, a name
// given twice, not a name, or also given an amount.
func (a Alter) checkDrop() error {
	if len(a.Drop) > MaxNamed+1 {
		return fmt.Errorf("%d requests to drop; at most %d", len(a.Drop), MaxNamed+1)
	}
	seen := make(map[string]bool, len(a.Drop))
	for _, name := range a.Drop {
		if name == DropGPUs {
			if a.GPUs != 0 {
				return fmt.Errorf("gpus: give a count or 0, not both")
			}
		} else if err := checkResourceName(name); err != nil {
			return err
		}
		if _, set := a.Named[name]; set {
			return fmt.Errorf("resource %s: give an amount or 0, not both", name)
		}
		if seen[name] {
			return fmt.Errorf("resource %s dropped twice", Printable(name))
		}
		seen[name] = true
	}
	return nil
}
