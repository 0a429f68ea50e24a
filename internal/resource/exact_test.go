package resource

import (
	"slices"
	"strings"
	"testing"
)

func TestTakeExact(t *testing.T) {
	newPool := func() *Pool {
		p, err := NewPool(Capacity{CPUs: 4, CoreIDs: []int{10, 11, 12, 13}, Mem: 8 * GiB, GPUIDs: []string{"0", "1", "2"}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := newPool()
	g, err := p.TakeExact(Request{CPUs: 2, Mem: GiB, GPUs: 1}, []int{13, 11}, []string{"2"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Cores(), []int{11, 13}) || !slices.Equal(g.GPUs(), []string{"2"}) {
		t.Errorf("granted cores %v GPUs %v; want [11 13] [2]", g.Cores(), g.GPUs())
	}
	f := p.Free()
	if !slices.Equal(f.CoreIDs, []int{10, 12}) || !slices.Equal(f.GPUIDs, []string{"0", "1"}) || f.Mem != 7*GiB {
		t.Errorf("free after: %v", f)
	}
	// The ids chosen by count are the lowest still free.
	h, err := p.TakeExact(Request{CPUs: 1, GPUs: 1}, nil, nil)
	if err != nil || !slices.Equal(h.Cores(), []int{10}) || !slices.Equal(h.GPUs(), []string{"0"}) {
		t.Errorf("by count: %v %v, %v", h.Cores(), h.GPUs(), err)
	}
	p.Give(g)
	p.Give(h)
	if !p.Idle() || len(p.Free().CoreIDs) != 4 || len(p.Free().GPUIDs) != 3 {
		t.Errorf("not idle after giving back: %v", p.Free())
	}

	for _, tt := range []struct {
		name  string
		r     Request
		cores []int
		gpus  []string
		want  string
	}{
		{"unknown core", Request{CPUs: 1}, []int{7}, nil, "core 7"},
		{"core twice", Request{CPUs: 2}, []int{10, 10}, nil, "core 10"},
		{"too few cores", Request{CPUs: 2}, []int{10}, nil, "1 core ids for 2 cpus"},
		{"unknown GPU", Request{GPUs: 1}, nil, []string{"9"}, `GPU "9"`},
		{"too many", Request{CPUs: 5}, nil, nil, "does not fit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool()
			_, err := p.TakeExact(tt.r, tt.cores, tt.gpus)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("TakeExact = %v; want %q", err, tt.want)
			}
			if !p.Idle() || len(p.Free().CoreIDs) != 4 {
				t.Errorf("something taken on error: %v", p.Free())
			}
		})
	}
	// A taken core cannot be taken again.
	p = newPool()
	p.TakeExact(Request{CPUs: 1}, []int{12}, nil)
	if _, err := p.TakeExact(Request{CPUs: 1}, []int{12}, nil); err == nil {
		t.Error("core 12 taken twice")
	}
}
