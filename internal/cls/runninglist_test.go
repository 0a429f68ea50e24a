package cls

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// A dashboard listing of the executing jobs names the jobs running now
// (from the core's memory) rather than reading every job to find them;
// other listings are left as they are.
func TestRunningListing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		st   protocol.Stat
		want bool
	}{
		{protocol.Stat{States: "E"}, true},
		{protocol.Stat{States: "p"}, true},
		{protocol.Stat{States: "EP", Queue: "q"}, true},
		{protocol.Stat{States: ""}, false},
		{protocol.Stat{States: "EQ"}, false},
		{protocol.Stat{States: "E", Target: "t"}, false},
		{protocol.Stat{States: "E", IDs: []int64{1}}, false},
	} {
		if got := onlyRunning(tc.st); got != tc.want {
			t.Errorf("onlyRunning(%+v) = %v, want %v", tc.st, got, tc.want)
		}
	}
	ids := []int64{3, 8, 20, 21}
	for _, tc := range []struct {
		after int64
		ids   []int64
		ok    bool
	}{
		{0, []int64{3, 8, 20, 21}, true},
		{8, []int64{20, 21}, true},
		{9, []int64{20, 21}, true},
		{21, nil, false},
	} {
		st, ok := runningPage(protocol.Stat{States: "E"}, tc.after, ids)
		if ok != tc.ok || (ok && !slices.Equal(st.IDs, tc.ids)) {
			t.Errorf("after %d: %v %v, want %v %v", tc.after, st.IDs, ok, tc.ids, tc.ok)
		}
	}
	many := make([]int64, maxRunningIDs+1)
	for i := range many {
		many[i] = int64(i + 1)
	}
	if st, ok := runningPage(protocol.Stat{States: "E"}, 0, many); !ok || st.IDs != nil {
		t.Errorf("%d running jobs: named %d ids, %v; want the listing as it is", len(many), len(st.IDs), ok)
	}
}
