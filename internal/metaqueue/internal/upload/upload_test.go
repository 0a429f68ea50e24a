package upload

import (
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestUpload: chunks are checked and spooled; a bad spec, a chunk past
// the bounds, a negative array cap or a bad environment is refused with the
// upload left as it was.
func TestUpload(t *testing.T) {
	t.Parallel()
	u, err := New(t.TempDir(), 3, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Abort()
	ok := []protocol.JobSpec{{Target: "a", Command: "true"}, {Target: "b", Command: "true", Prereqs: []string{"a"}}}
	if err := u.Add(1, ok); err != nil || u.Len() != 2 {
		t.Fatalf("Add: %v, %d spooled", err, u.Len())
	}
	for name, add := range map[string]func() error{
		"a spec without a command": func() error { return u.Add(3, []protocol.JobSpec{{Target: "c"}}) },
		"past the jobs bound":      func() error { return u.AddChecked(3, ok) },
		"a negative array cap":     func() error { return u.Array("1-2", -1) },
		"a bad variable name":      func() error { return u.SharedEnv(map[string]string{"A=B": "1"}) },
	} {
		if err := add(); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
	if u.Len() != 2 || u.IsArray || u.Env != "" {
		t.Errorf("after refusals: %d spooled, array %v, env %q", u.Len(), u.IsArray, u.Env)
	}
	if err := u.Array("1-2", 1); err != nil || !u.IsArray || u.ArrayLimit != 1 {
		t.Errorf("Array: %v %+v", err, u)
	}
	if err := u.SharedEnv(map[string]string{"A": "1"}); err != nil || u.Env == "" {
		t.Errorf("SharedEnv: %v, %q", err, u.Env)
	}
}
