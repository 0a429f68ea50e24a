package bundles

import (
	"testing"

	"github.com/mq-hpc/mq/internal/runs"
)

func TestHeir(t *testing.T) {
	type at struct {
		attempt int
		ph      int64
	}
	for _, tc := range []struct {
		name    string
		running map[int64]at // bundle 10 is jobs 10..13; job 5 is alone
		id, ph  int64
		job     int64
		attempt int
		ok      bool
	}{
		{"a job in no bundle has none", map[int64]at{5: {1, 7}}, 5, 7, 0, 0, false},
		{"none other runs", map[int64]at{10: {1, 7}}, 10, 7, 0, 0, false},
		{"the first other member on the same placeholder", map[int64]at{10: {1, 7}, 12: {2, 7}, 13: {1, 7}}, 10, 7, 12, 2, true},
		{"a member on another placeholder is not", map[int64]at{10: {1, 7}, 11: {1, 8}, 13: {3, 7}}, 10, 7, 13, 3, true},
		{"only elsewhere", map[int64]at{11: {1, 8}}, 10, 7, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			b.members[10] = []int64{10, 11, 12, 13}
			for _, id := range b.members[10] {
				b.of[id] = 10
			}
			running := runs.Rows{}
			for m, r := range tc.running {
				running[m] = &runs.Run{Attempt: r.attempt, Placeholder: r.ph}
			}
			job, o := b.Heir(tc.id, tc.ph, running)
			attempt, ok := 0, o != nil
			if ok {
				attempt = o.Attempt
			}
			if job != tc.job || attempt != tc.attempt || ok != tc.ok {
				t.Errorf("Heir(%d, %d) = %d, %d, %v; want %d, %d, %v", tc.id, tc.ph, job, attempt, ok, tc.job, tc.attempt, tc.ok)
			}
		})
	}
}
