package policy

import "testing"

func TestBaselineAndComparisons(t *testing.T) {
	t.Parallel()
	if b := Baseline(); b.Name != "fcfs" || !b.ForQueues() {
		t.Errorf("baseline %q (for queues %v), want fcfs", b.Name, b.ForQueues())
	}
	for _, p := range All() {
		if p.ComparedWith == "" {
			continue
		}
		if _, err := Lookup(p.ComparedWith); err != nil || p.ComparedWith == p.Name {
			t.Errorf("policy %s is compared with %q: %v", p.Name, p.ComparedWith, err)
		}
	}
	if sa, _ := Lookup("sa"); sa.ComparedWith != "xsufferage" {
		t.Errorf("sa is compared with %q, want xsufferage (the seed's table 4.5)", sa.ComparedWith)
	}
}

// TestStored: a stored name this build knows is its policy; one it does
// not (a newer version's) is the baseline.
func TestStored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, want string }{
		{"dc", "dc"},
		{"sjf", "sjf"},
		{"from-a-newer-version", "fcfs"},
		{"", "fcfs"},
	} {
		if got := Stored(tc.name); got.Name != tc.want {
			t.Errorf("Stored(%q) = %s, want %s", tc.name, got.Name, tc.want)
		}
	}
}
