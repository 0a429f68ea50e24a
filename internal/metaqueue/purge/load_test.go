package purge

import (
	"reflect"
	"testing"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

type loadedCount struct {
	t dag.TargetID
	s job.State
	n int
}

type fakeCounts []loadedCount

func (f *fakeCounts) LoadCounts(t dag.TargetID, s job.State, n int) {
	*f = append(*f, loadedCount{t, s, n})
}

func TestLoadedAddTo(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Loaded
		want fakeCounts
	}{
		{"nothing purged", Loaded{}, nil},
		{"done and bad", Loaded{Targets: []Purged{{Target: 1, Done: 3, Bad: 2}}},
			fakeCounts{{1, job.Done, 3}, {1, job.Failed, 2}}},
		{"zeros are not counted", Loaded{Targets: []Purged{{Target: 1, Bad: 4}, {Target: 2, Done: 1}}},
			fakeCounts{{1, job.Failed, 4}, {2, job.Done, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got fakeCounts
			tc.l.AddTo(&got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("AddTo: %v, want %v", got, tc.want)
			}
		})
	}
}
