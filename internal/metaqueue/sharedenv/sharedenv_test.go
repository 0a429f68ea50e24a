package sharedenv

import (
	"maps"
	"strings"
	"testing"
)

// TestMerge: a job's own variables win over the shared ones; either may
// be missing; a corrupt row is an error, not an empty environment.
func TestMerge(t *testing.T) {
	for _, c := range []struct {
		name, shared, own string
		want              map[string]string
		bad               bool
	}{
		{"none", "", "", map[string]string{}, false},
		{"shared only", `{"A":"s","B":"s"}`, "", map[string]string{"A": "s", "B": "s"}, false},
		{"own only", "", `{"A":"o"}`, map[string]string{"A": "o"}, false},
		{"own wins", `{"A":"s","B":"s"}`, `{"A":"o"}`, map[string]string{"A": "o", "B": "s"}, false},
		{"corrupt", `{"A":`, "", nil, true},
	} {
		got, err := Merge(c.shared, c.own)
		if (err != nil) != c.bad {
			t.Errorf("%s: error %v, want one: %v", c.name, err, c.bad)
			continue
		}
		if !c.bad && !maps.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// TestEncode: none is "", a good environment round-trips through Merge,
// a bad one is refused naming the shared environment.
func TestEncode(t *testing.T) {
	if raw, err := Encode(nil); raw != "" || err != nil {
		t.Errorf("Encode(nil) = %q, %v; want \"\", nil", raw, err)
	}
	env := map[string]string{"PATH": "/usr/bin", "A": "1"}
	raw, err := Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Merge(raw, ""); err != nil || !maps.Equal(got, env) {
		t.Errorf("Merge(Encode(env)) = %v, %v; want %v", got, err, env)
	}
	_, err = Encode(map[string]string{"": "x"})
	if err == nil || !strings.Contains(err.Error(), "the submission's shared environment: ") {
		t.Errorf("Encode of a bad environment: %v, want the shared environment's error", err)
	}
}
