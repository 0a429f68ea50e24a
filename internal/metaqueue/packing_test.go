package metaqueue

import (
	"context"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// gib is a GiB in bytes.
const gib = 1 << 30

func asks(target string, r protocol.Resources) protocol.JobSpec {
	js := spec(target, "true")
	js.Resources = r
	return js
}

// TestRequestsKept: a job's request is stored with its queue's defaults
// applied (its own values winning), shown in listings and details, kept
// across a reopen and through a bulk submission; a job that asks for
// nothing has none.
func TestRequestsKept(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "big", Defaults: &protocol.Resources{CPUs: 2, Mem: 4 * gib}}); err != nil {
		t.Fatal(err)
	}
	own := asks("a", protocol.Resources{CPUs: 8, GPUs: 1})
	own.Queue = "big"
	plain := spec("b", "true")
	deflt := spec("c", "true")
	deflt.Queue = "big"
	ids := e.submit(own, plain, deflt)

	b, err := e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(1, []protocol.JobSpec{asks("d", protocol.Resources{CPUs: 3, Named: map[string]int{"licence": 2}})}); err != nil {
		t.Fatal(err)
	}
	first, err := b.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{
		ids[0]: "cpus=8 mem=4 GiB gpus=1",
		ids[1]: "",
		ids[2]: "cpus=2 mem=4 GiB",
		first:  "cpus=3 licence=2",
	}
	check := func(when string) {
		t.Helper()
		for id, w := range want {
			if got := e.job(id).Resources.Describe(); got != w {
				t.Errorf("%s: job %d's request = %q, want %q", when, id, got, w)
			}
		}
		for _, ji := range e.stat(protocol.Stat{}) {
			if got := ji.Resources.Describe(); got != want[ji.ID] {
				t.Errorf("%s: listing: job %d's request = %q, want %q", when, ji.ID, got, want[ji.ID])
			}
		}
	}
	check("submitted")
	e.reopen()
	check("reopened")
	if !e.s.KeepsResources() {
		t.Error("the store does not say it keeps requests: the server warns they are dropped")
	}
	if r := e.s.pack.Request(ids[0]); r.CPUs != 8 || r.Mem != 4*gib || r.GPUs != 1 {
		t.Errorf("after reopen packing has job %d's request as %+v", ids[0], r)
	}
}
