package runs

import "iter"

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
