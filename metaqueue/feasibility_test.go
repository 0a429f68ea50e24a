package metaqueue

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestFeasibleFirstNoDecides(t *testing.T) {
	var ran []string
	check := func(name string, v verdict, err error) feasibility {
		return func(*Store, asking) (verdict, error) {
			ran = append(ran, name)
			return v, err
		}
	}
	boom := errors.New("boom")
	for _, c := range []struct {
		checks []feasibility
		want   verdict
		err    error
		ran    string
	}{
		{nil, feasible, nil, ""},
		{[]feasibility{check("a", feasible, nil), check("b", feasible, nil)}, feasible, nil, "a b"},
		{[]feasibility{check("a", held, nil), check("b", aside, nil)}, held, nil, "a"},
		{[]feasibility{check("a", feasible, nil), check("b", aside, nil), check("c", held, nil)}, aside, nil, "a b"},
		{[]feasibility{check("a", aside, boom), check("b", feasible, nil)}, aside, boom, "a"},
	} {
		ran = nil
		v, err := (&Store{}).feasible(c.checks, asking{})
		if v != c.want || err != c.err || strings.Join(ran, " ") != c.ran {
			t.Errorf("got %v, %v after %q; want %v, %v after %q", v, err, ran, c.want, c.err, c.ran)
		}
	}
}

// The two picks run their checks in one order: the dc chain is the ordered
// chain less the checks DC does without.
func TestFeasibilityChainsAgree(t *testing.T) {
	name := func(f feasibility) string {
		n := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
		return n[strings.LastIndex(n, ".")+1:]
	}
	i := 0
	for _, f := range dcChecks {
		for i < len(orderedChecks) && name(orderedChecks[i]) != name(f) {
			i++
		}
		if i == len(orderedChecks) {
			t.Fatalf("dc check %s is not in the ordered chain, or out of its order", name(f))
		}
	}
	if got := name(orderedChecks[0]) + " " + name(orderedChecks[1]); got != "heldByArray parkedInfeasible" {
		t.Errorf("the checks that hold a job come first; got %s", got)
	}
}
