package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestAlterValidated: the server refuses what mqalter's flags would, sent
// raw by a client that checks nothing, with one line of bad_request and
// the job unchanged; a good request changes it.
func TestAlterValidated(t *testing.T) {
	t.Parallel()
	srv := &Server{Store: newStore(t)}
	p := connect(t, srv, protocol.RoleUser)
	p.hello("")
	var sub protocol.SubmitReply
	p.do(protocol.OpSubmit.Name, protocol.Submit{Jobs: []protocol.JobSpec{{Target: "a", Command: "true"}}}, &sub)
	id := sub.IDs[0]
	for _, tc := range []struct{ body, want string }{
		{`{"ids":[ID]}`, "nothing to change"},
		{`{"ids":[ID],"priority":5000}`, "priority must be -1024..1023"},
		{`{"ids":[ID],"priority":-1025}`, "priority must be -1024..1023"},
		{`{"ids":[ID],"time":-3}`, "time limit"},
		{`{"ids":[ID],"time":1e300}`, "time limit"},
		{`{"ids":[ID],"est":-1}`, "estimate must be"},
		{`{"ids":[ID],"est":1e12}`, "estimate must be"},
		{`{"ids":[ID],"cpus":-1}`, "cpus -1"},
		{`{"ids":[ID],"cpus":100000000}`, "cpus"},
		{`{"ids":[ID],"cpus":2,"cpus_auto":true}`, "a count or auto"},
		{`{"ids":[ID],"mem_bytes":-1}`, "memory"},
		{`{"ids":[ID],"mem_bytes":9000000000000000000}`, "memory"},
		{`{"ids":[ID],"gpus":-2}`, "gpus -2"},
		{`{"ids":[ID],"resources":{"9lives":1}}`, "not a name"},
		{`{"ids":[ID],"resources":{"lic":0}}`, "must be at least 1"},
		{`{"ids":[ID],"resources":{"lic":-1}}`, "must be at least 1"},
		{`{"ids":[ID],"drop":["gpus"],"gpus":2}`, "gpus: give a count or 0, not both"},
		{`{"ids":[ID],"drop":["lic"],"resources":{"lic":2}}`, "not both"},
		{`{"ids":[ID],"drop":["lic","lic"]}`, "dropped twice"},
		{`{"ids":[ID],"drop":["cpus"]}`, "own key"},
		{`{"ids":[ID],"drop":["` + strings.Repeat("x", 100) + `"]}`, "longer than 64 bytes"},
		{`{"ids":[ID],"drop":["\u001b[31m"]}`, "not a name"},
		{`{"ids":[ID],"drop":[` + strings.Repeat(`"a",`, protocol.MaxNamed+1) + `"b"]}`, "at most"},
		{`{"ids":[ID],"drop":"gpus"}`, ""},
		{`{"priority":1}`, "no jobs named"},
		{`{"ids":[ID],"first":1,"last":2,"priority":1}`, "not both"},
		{`{"states":"E","priority":1}`, "no job in states E"},
		{`{"ids":"many","priority":1}`, ""},
		{`{"ids":[ID],"priority":"high"}`, ""},
	} {
		body := json.RawMessage(strings.ReplaceAll(tc.body, "ID", "1"))
		e := p.fails(protocol.OpAlter.Name, body, protocol.CodeBadRequest)
		if !strings.Contains(e.Msg, tc.want) {
			t.Errorf("alter %s: %q, want it to say %q", tc.body, e.Msg, tc.want)
		}
	}
	var d protocol.JobDetail
	p.do(protocol.OpJob.Name, protocol.JobQuery{ID: id}, &d)
	if d.Priority != 0 || d.Est != 0 || d.TimeLimit != 0 || d.Resources.Asks() {
		t.Fatalf("refused requests changed the job: %+v", d.JobInfo)
	}
	var ar protocol.ActionReply
	p.do(protocol.OpAlter.Name, json.RawMessage(`{"ids":[1],"atomic":true,"priority":-7,"time":90,"mem_bytes":1073741824}`), &ar)
	if len(ar.IDs) != 1 || len(ar.Errors) != 0 {
		t.Fatalf("alter: %+v", ar)
	}
	p.do(protocol.OpJob.Name, protocol.JobQuery{ID: id}, &d)
	if d.Priority != -7 || d.TimeLimit != 90 || d.Est != 90 || d.Mem != 1<<30 {
		t.Fatalf("after alter the job shows %+v", d.JobInfo)
	}
	// A placeholder of two cores and no GPU is all there is.
	ph := connect(t, srv, protocol.RolePlaceholder)
	ph.hello(protocol.RolePlaceholder)
	ph.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 2, OutDir: t.TempDir(), Capacity: &protocol.Capacity{CPUs: 2}}, nil)
	p.do(protocol.OpAlter.Name, json.RawMessage(`{"ids":[1],"atomic":true,"gpus":1,"resources":{"lic":2,"fpga":1}}`), &ar)
	if len(ar.Warnings) != 1 || !strings.HasPrefix(ar.Warnings[0], "job 1 waits: needs 1 GPU") {
		t.Fatalf("alter to a request no site holds warned %q, want job 1 waits for its GPU", ar.Warnings)
	}
	ar = protocol.ActionReply{}
	p.do(protocol.OpAlter.Name, json.RawMessage(`{"ids":[1],"atomic":true,"drop":["gpus","fpga"]}`), &ar)
	p.do(protocol.OpJob.Name, protocol.JobQuery{ID: id}, &d)
	if got := d.Resources.Describe(); got != "mem=1 GiB lic=2" {
		t.Fatalf("after the drops the job asks %q, want mem=1 GiB lic=2", got)
	}
	if len(ar.Warnings) != 0 {
		t.Fatalf("an alter that asks for nothing more warned %q", ar.Warnings)
	}
	// A placeholder may not send it.
	ph.fails(protocol.OpAlter.Name, json.RawMessage(`{"ids":[1],"priority":1}`), protocol.CodeForbidden)
}
