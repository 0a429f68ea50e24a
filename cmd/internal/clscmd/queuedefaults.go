package clscmd

import (
	"context"
	"strings"

	"github.com/mq-hpc/mq/client"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/protocol"
)

// namedList collects repeated --resource NAME=N values.
type namedList struct{ vals []string }

func (l *namedList) Set(v string) error {
	var r protocol.Resources
	if err := r.AddNamed(v); err != nil {
		return err
	}
	l.vals = append(l.vals, v)
	return nil
}

func (l *namedList) String() string { return strings.Join(l.vals, ",") }

// resources are the resource defaults cls queue set's flags give (set
// names the flags given), checked before anything is sent.
func (v *queueSetValues) resources(set map[string]bool) (protocol.Resources, error) {
	var r protocol.Resources
	if set["cpus"] {
		if err := r.SetCPUs(v.cpus); err != nil {
			return r, mqcli.Usagef("--cpus: %v", err)
		}
	}
	if set["mem"] {
		if err := r.SetMem(v.mem); err != nil {
			return r, mqcli.Usagef("--mem: %v", err)
		}
	}
	if set["gpus"] {
		if err := r.SetGPUs(v.gpus); err != nil {
			return r, mqcli.Usagef("--gpus: %v", err)
		}
	}
	for _, s := range v.named.vals {
		if err := r.AddNamed(s); err != nil {
			return r, mqcli.Usagef("--resource: %v", err)
		}
	}
	return r, nil
}

// queueDefaults is the QueueSet.Defaults for flags that give res (clear:
// --no-defaults first): the queue's current defaults with res laid over
// them, each kind res gives replacing the queue's; nil when no resource
// flag was given, which leaves them as they are.
func queueDefaults(ctx context.Context, cl *client.Client, name string, res protocol.Resources, clear bool) (*protocol.Resources, error) {
	if !res.Asks() && !clear {
		return nil, nil
	}
	var cur protocol.Resources
	if !clear {
		ql, err := client.Do(ctx, cl, protocol.OpQueueList, protocol.Empty{})
		if err != nil {
			return nil, err
		}
		for _, q := range ql.Queues {
			if q.Name == name {
				cur = q.Defaults
			}
		}
	}
	merged := res.WithDefaults(cur)
	return &merged, nil
}
