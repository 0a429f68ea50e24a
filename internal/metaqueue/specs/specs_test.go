package specs

import (
	"maps"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestCheck: a bad spec is refused (bad_request), named by position
// unless alone; good ones give their edges.
func TestCheck(t *testing.T) {
	good := protocol.JobSpec{Target: "b", Command: "true", Prereqs: []string{"a"}}
	bad := protocol.JobSpec{Target: "", Command: "true"}
	for _, c := range []struct {
		name    string
		specs   []protocol.JobSpec
		wantErr string // prefix; "": none
	}{
		{"good", []protocol.JobSpec{good, good}, ""},
		{"alone", []protocol.JobSpec{bad}, ""},
		{"second", []protocol.JobSpec{good, bad}, "job 2: "},
	} {
		edges, err := Check(c.specs)
		switch {
		case c.name == "alone":
			if !protocol.IsCode(err, protocol.CodeBadRequest) || strings.HasPrefix(err.Error(), "job ") {
				t.Errorf("%s: %v, want a bad_request not naming a position", c.name, err)
			}
		case c.wantErr != "":
			if !protocol.IsCode(err, protocol.CodeBadRequest) || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: %v, want a bad_request with %q", c.name, err, c.wantErr)
			}
		case err != nil || edges == nil:
			t.Errorf("%s: %v, %v; want the edges", c.name, edges, err)
		}
	}
}

// TestBulkAdd: jobs with no prerequisite are counted by queue (the default one named); a bad
// spec is refused naming its line, unless the caller checked it already.
func TestBulkAdd(t *testing.T) {
	b := NewBulk()
	for i, js := range []protocol.JobSpec{
		{Target: "a", Command: "true"},
		{Target: "b", Command: "true", Queue: "q"},
		{Target: "c", Command: "true", Queue: "q", Prereqs: []string{"a"}},
		{Target: "d", Command: "true", AfterAny: []string{"b"}},
	} {
		if err := b.Add(1+i, &js, true); err != nil {
			t.Fatal(err)
		}
	}
	if want := map[string]int{protocol.DefaultQueue: 1, "q": 1}; !maps.Equal(b.Free, want) {
		t.Errorf("free: %v, want %v", b.Free, want)
	}
	bad := protocol.JobSpec{Command: "true"}
	if err := b.Add(7, &bad, true); !protocol.IsCode(err, protocol.CodeBadRequest) || !strings.HasPrefix(err.Error(), "line 7: ") {
		t.Errorf("a bad spec: %v, want a bad_request naming line 7", err)
	}
	if err := b.Add(8, &bad, false); err != nil {
		t.Errorf("a spec checked already: %v", err)
	}
}
