package cls

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// Followers are counted per job and in all: heartbeats learn which running
// attempts are followed, a staged chunk wakes the job's followers, and one
// follower beyond the bound is refused busy.
func TestOutputsFollowers(t *testing.T) {
	t.Parallel()
	o := &outputs{max: 2}
	running := []protocol.JobRef{{ID: 1, Attempt: 1}, {ID: 2, Attempt: 3}}
	if got := o.followed(running); got != nil {
		t.Errorf("followed with no follower: %v", got)
	}
	wake, leave1, err := o.join(2)
	if err != nil {
		t.Fatal(err)
	}
	_, leave2, err := o.join(2)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.followed(running); !slices.Equal(got, running[1:]) {
		t.Errorf("followed: %v, want job 2's attempt", got)
	}
	if _, _, err := o.join(1); err == nil || protocol.AsError(err).Code != protocol.CodeBusy {
		t.Errorf("a third follower: %v, want busy", err)
	}
	ch := wake()
	o.staged(1) // another job: no wake
	select {
	case <-ch:
		t.Fatal("woken by another job's output")
	default:
	}
	o.staged(2)
	select {
	case <-ch:
	default:
		t.Fatal("not woken by the job's output")
	}
	leave1()
	if got := o.followed(running); len(got) != 1 {
		t.Errorf("followed with one follower left: %v", got)
	}
	leave2()
	if got := o.followed(running); got != nil || len(o.watch) != 0 || o.followers != 0 {
		t.Errorf("after both left: followed %v, watch %v, followers %d", got, o.watch, o.followers)
	}
	if _, leave, err := o.join(1); err != nil {
		t.Errorf("a follower after the others left: %v", err)
	} else {
		leave()
	}
}
