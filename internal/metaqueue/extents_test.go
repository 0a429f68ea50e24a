package metaqueue

import (
	"context"
	"reflect"
	"testing"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestStreamedExtents: the extents a report carries are stored with the
// attempt's end and returned in the job's detail, the current attempt's
// and an earlier one's; one naming another placeholder's file is not
// kept, and a resent report changes nothing.
func TestStreamedExtents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit(protocol.JobSpec{Target: "t", Command: "echo hi", Cwd: "/work"})[0]
	ph := e.register("s1")
	other := e.register("s2")
	a := e.next(ph, 1)[0]
	own := protocol.StreamFileName(ph, 0)
	first := protocol.Report{ID: id, Attempt: a.Attempt, Reason: protocol.ReasonInterrupted, Exit: 1, Streamed: []protocol.Streamed{
		{Stream: "stdout", File: own, Last: 8, Bytes: 3},
	}}
	e.report(ph, first)
	e.mustBe(id, job.Queued)
	a = e.next(ph, 1)[0]
	if a.Attempt != 2 {
		t.Fatalf("rerun is attempt %d, want 2", a.Attempt)
	}
	rep := protocol.Report{ID: id, Attempt: 2, Streamed: []protocol.Streamed{
		{Stream: "stdout", File: own, Last: 100, Bytes: 4},
		{Stream: "stderr", File: protocol.StreamFileName(other, 0), Last: 8, Bytes: 5}, // not ph's
	}}
	e.report(ph, rep)
	resent := rep
	resent.Streamed = []protocol.Streamed{{Stream: "stdout", File: own, Last: 999, Bytes: 9}}
	e.report(ph, resent)
	e.mustBe(id, job.Done)
	d := e.job(id)
	path := "/out/s1/" + protocol.StreamDir + "/" + own
	if want := (&protocol.StreamExtent{Path: path, Attempt: 2, Last: 100, Bytes: 4}); !reflect.DeepEqual(d.StdoutStream, want) {
		t.Errorf("stdout stream %+v, want %+v", d.StdoutStream, want)
	}
	if d.StderrStream != nil {
		t.Errorf("stderr stream %+v kept from another placeholder's file", d.StderrStream)
	}
	var found bool
	for _, h := range d.History {
		if h.Attempt == 1 {
			found = true
			if want := (&protocol.StreamExtent{Path: path, Attempt: 1, Last: 8, Bytes: 3}); !reflect.DeepEqual(h.StdoutStream, want) {
				t.Errorf("attempt 1 stdout stream %+v, want %+v", h.StdoutStream, want)
			}
		}
	}
	if !found {
		t.Errorf("no attempt 1 in history %+v", d.History)
	}
	e.check()
}

// TestStreamedExtentsOfDeleted: a job deleted while executing is killed
// by its placeholder, whose report comes after the job left Executing;
// what it wrote is kept all the same (mqstat --cat shows it, as a file
// per output does), but only from the placeholder that ran that attempt.
func TestStreamedExtentsOfDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.submit(protocol.JobSpec{Target: "t", Command: "sleep 100"}, protocol.JobSpec{Target: "t", Command: "sleep 100"})
	ph := e.register("s1")
	other := e.register("s2")
	as := e.next(ph, 2)
	if _, err := e.s.Delete(context.Background(), protocol.Select{IDs: ids}); err != nil {
		t.Fatal(err)
	}
	rep := func(i int, ph int64) protocol.Report {
		return protocol.Report{ID: as[i].ID, Attempt: as[i].Attempt, Exit: 143, Streamed: []protocol.Streamed{
			{Stream: "stdout", File: protocol.StreamFileName(ph, 0), Last: 8, Bytes: 6}}}
	}
	e.report(ph, rep(0, ph))
	e.report(other, rep(1, other)) // not the placeholder that ran it
	e.mustBe(as[0].ID, job.Deleted)
	path := "/out/s1/" + protocol.StreamDir + "/" + protocol.StreamFileName(ph, 0)
	if d, want := e.job(as[0].ID), (&protocol.StreamExtent{Path: path, Attempt: as[0].Attempt, Last: 8, Bytes: 6}); !reflect.DeepEqual(d.StdoutStream, want) {
		t.Errorf("deleted job's stdout stream %+v, want %+v", d.StdoutStream, want)
	}
	if d := e.job(as[1].ID); d.StdoutStream != nil {
		t.Errorf("stdout stream %+v kept from a placeholder that did not run the job", d.StdoutStream)
	}
	e.check()
}
