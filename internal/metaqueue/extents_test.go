package metaqueue

import (
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
