package plan

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkListDecode is one decode of a list schedule of a random DAG of
// 2,000 tasks on 16 slots: the step a list search repeats millions of
// times.
func BenchmarkListDecode(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 2000
	runtime := make([]float64, n)
	prereqs := make([][]int32, n)
	users := make([][]int32, n)
	for i := range n {
		runtime[i] = 1 + rng.Float64()*100
		for range rng.IntN(4) {
			if i > 0 {
				p := int32(rng.IntN(i))
				prereqs[i] = append(prereqs[i], p)
				users[p] = append(users[p], int32(i))
			}
		}
	}
	list := make([]int32, n)
	for i := range list {
		list[i] = int32(i)
	}
	s := newListSched(runtime, prereqs, users, 16)
	for b.Loop() {
		if s.makespan(list) < 0 {
			b.Fatal("cycle")
		}
	}
}
