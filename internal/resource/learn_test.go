package resource

import (
	"testing"
	"time"
)

func TestLearnerSuggest(t *testing.T) {
	l := NewLearner()
	c := Category{"q", "blast"}
	max := Request{CPUs: 16, Mem: 64 * GiB}
	for i := range 4 {
		l.Observe(c, GiB, 2*time.Second, time.Second)
		if r, learned := l.Suggest(c, max); learned || r.CPUs != 16 || r.Mem != 64*GiB {
			t.Fatalf("after %d jobs: %v %v; want the maximum", i+1, r, learned)
		}
	}
	// 20 jobs: RSS 1..20 GiB, cores 2.0 except one outlier at 7.5 and
	// one at 2.05 (which asks for 2).
	l = NewLearner()
	for i := 1; i <= 20; i++ {
		cpu := 2 * time.Second
		switch i {
		case 3:
			cpu = 7500 * time.Millisecond
		case 4:
			cpu = 2050 * time.Millisecond
		}
		l.Observe(c, int64(i)*GiB, cpu, time.Second)
	}
	r, learned := l.Suggest(c, max)
	// p95 of 20 values is the 19th: 19 GiB * 1.2 = 22.8 GiB, rounded up to 64 MiB.
	wantMem := roundUp(19*GiB*12/10, 64*MiB)
	if !learned || r.Mem != wantMem || r.CPUs != 2 {
		t.Errorf("Suggest = %v %v; want cpus=2 mem=%s", r, learned, FormatMem(wantMem))
	}
	if r, _ := l.Suggest(c, Request{CPUs: 1, Mem: 8 * GiB}); r.CPUs != 1 || r.Mem != 8*GiB {
		t.Errorf("Suggest over the maximum = %v; want capped", r)
	}
	got := l.Resolve(c, Request{AutoMem: true, CPUs: 3}, max)
	if got.AutoMem || got.Mem != wantMem || got.CPUs != 3 {
		t.Errorf("Resolve = %+v", got)
	}
	if r, learned := l.Suggest(Category{"q", "other"}, max); learned || r.CPUs != 16 {
		t.Errorf("another category learned from this one: %v", r)
	}
}

func TestLearnerBounded(t *testing.T) {
	l := NewLearner()
	l.Keep = 32
	c := Category{"q", "t"}
	// 10,000 jobs at 1 GiB then 10,000 at 4 GiB: the sample stays 32
	// jobs and, being uniform, has both.
	for i := range 20000 {
		rss := GiB
		if i >= 10000 {
			rss = 4 * GiB
		}
		l.Observe(c, rss, time.Second, time.Second)
	}
	s := l.cats[c]
	if len(s.jobs) != 32 || s.seen != 20000 {
		t.Fatalf("sample %d of %d", len(s.jobs), s.seen)
	}
	if r, _ := l.Suggest(c, Request{}); r.Mem != roundUp(4*GiB*12/10, 64*MiB) || r.CPUs != 1 {
		t.Errorf("Suggest = %v", r)
	}
}

func TestMemRetry(t *testing.T) {
	for _, tt := range []struct {
		asked, max int64
		retries    int
		auto       bool
		next       int64
		retry      bool
	}{
		{8 * GiB, 64 * GiB, 0, false, 16 * GiB, true},
		{8 * GiB, 12 * GiB, 0, false, 12 * GiB, true},
		{8 * GiB, 8 * GiB, 0, false, 8 * GiB, false},
		{8 * GiB, 0, 0, false, 16 * GiB, true},
		{16 * GiB, 64 * GiB, 1, false, 16 * GiB, false}, // the user's size: once
		{16 * GiB, 64 * GiB, 1, true, 64 * GiB, true},   // mq's guess: the whole placeholder
		{16 * GiB, 16 * GiB, 1, true, 16 * GiB, false},  // it had the whole placeholder
		{16 * GiB, 0, 1, true, 16 * GiB, false},         // no maximum known
		{64 * GiB, 64 * GiB, 2, true, 64 * GiB, false},
		{0, 64 * GiB, 0, false, 0, false},
		{1 << 62, 0, 0, false, 1<<63 - 1, true},
	} {
		next, retry := MemRetry(tt.asked, tt.max, tt.retries, tt.auto)
		if next != tt.next || retry != tt.retry {
			t.Errorf("MemRetry(%d, %d, %d, %v) = %d, %v; want %d, %v", tt.asked, tt.max, tt.retries, tt.auto, next, retry, tt.next, tt.retry)
		}
	}
}
