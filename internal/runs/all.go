package runs

import (
	"iter"
	"slices"
)

// All yields every attempt running now, by job: each job's row attempt,
// then its copies.
func All(rows Rows, cs Copies) iter.Seq2[int64, *Run] {
	return func(yield func(int64, *Run) bool) {
		for id, r := range rows {
			if !yield(id, r) {
				return
			}
		}
		for id, rs := range cs {
			for _, r := range rs {
				if !yield(id, r) {
					return
				}
			}
		}
	}
}

// PerPlaceholder counts the attempts running now at each placeholder,
// copies included.
func PerPlaceholder(rows Rows, cs Copies) map[int64]int {
	m := map[int64]int{}
	for _, r := range All(rows, cs) {
		m[r.Placeholder]++
	}
	return m
}

// Running is PerPlaceholder and Jobs.
func Running(rows Rows, cs Copies) (map[int64]int, []int64) {
	return PerPlaceholder(rows, cs), Jobs(rows, cs)
}

// Jobs lists the jobs with an attempt running now, in id order.
func Jobs(rows Rows, cs Copies) []int64 {
	ids := make([]int64, 0, len(rows))
	for id := range rows {
		ids = append(ids, id)
	}
	for id := range cs {
		if _, ok := rows[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
