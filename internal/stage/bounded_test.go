package stage

import (
	"context"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMoveBoundedEachPair moves a 96 MiB file between every pair of
// kinds of place (Dir and SFTP, as source and target): the heap in use
// never grows by a third of the file. TestMoveBounded counts allocations,
// which SFTP's in-process server here would swell; this samples the heap
// instead, so that a whole-file buffer anywhere in a path would show.
func TestMoveBoundedEachPair(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 96 MiB per pair")
	}
	const size = 96 << 20
	eachPair(t, func(t *testing.T, p *pair) {
		f, err := os.Create(p.A + "/big")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, io.LimitReader(&pattern{}, size)); err != nil {
			t.Fatal(err)
		}
		must(t, f.Close())
		stop := heapPeak()
		res := p.m.Move(context.Background(), Transfer{Path: "/big", From: "a", To: "b", Size: size})
		grew := stop()
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		t.Logf("moving %d MiB: the heap grew by at most %.1f MiB", size>>20, float64(grew)/(1<<20))
		if grew > size/3 {
			t.Errorf("moving %d MiB grew the heap by %d MiB: a file is held in memory", size>>20, grew>>20)
		}
		if want := patternSum(size); res.SHA256 != want {
			t.Errorf("sha %s, want %s", res.SHA256, want)
		}
		if fi, err := os.Stat(p.B + "/big"); err != nil || fi.Size() != size {
			t.Errorf("target: %v, %v", fi, err)
		}
	})
}

// heapPeak samples the heap in use every millisecond until stop, which
// returns its highest growth over the start.
func heapPeak() func() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > base && m.HeapInuse-base > peak.Load() {
				peak.Store(m.HeapInuse - base)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}
