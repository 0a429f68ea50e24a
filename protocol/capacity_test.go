package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckCapacity(t *testing.T) {
	tests := []struct {
		name string
		c    Capacity
		want string // "" = valid
	}{
		{"slots only", Capacity{CPUs: 4}, ""},
		{"full", Capacity{CPUs: 2, CoreIDs: []int{4, 5}, Mem: 1 << 30, GPUs: 2, GPUIDs: []string{"0", "GPU-1a"}, Named: map[string]int{"licence": 2}}, ""},
		{"grant by count", Capacity{CPUs: 2, GPUs: 1}, ""},
		{"negative cpus", Capacity{CPUs: -1}, "cpus must be"},
		{"too many cpus", Capacity{CPUs: MaxCapacityCPUs + 1}, "cpus must be"},
		{"core ids mismatch", Capacity{CPUs: 2, CoreIDs: []int{1}}, "1 core ids for 2 cpus"},
		{"core id repeated", Capacity{CPUs: 2, CoreIDs: []int{1, 1}}, "repeated"},
		{"negative memory", Capacity{CPUs: 1, Mem: -1}, "negative memory"},
		{"gpu ids mismatch", Capacity{CPUs: 1, GPUs: 2, GPUIDs: []string{"0"}}, "1 GPU ids for 2 gpus"},
		{"gpu id with comma", Capacity{CPUs: 1, GPUs: 1, GPUIDs: []string{"0,1"}}, "GPU id"},
		{"gpu id control", Capacity{CPUs: 1, GPUs: 1, GPUIDs: []string{"\x1b[2J"}}, "GPU id"},
		{"named not identifier", Capacity{CPUs: 1, Named: map[string]int{"9lives": 1}}, "resource name"},
		{"named negative", Capacity{CPUs: 1, Named: map[string]int{"lic": -1}}, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckCapacity("grant", tt.c)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("CheckCapacity: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("CheckCapacity = %v; want %q", err, tt.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("error of two lines: %q", err)
			}
		})
	}
}

func TestCapacityWire(t *testing.T) {
	// An assignment from a CLS that grants nothing has no grant: today's
	// one slot. One that grants carries every amount.
	var a Assignment
	if err := json.Unmarshal([]byte(`{"id":1,"attempt":1,"command":"true"}`), &a); err != nil || a.Grant != nil {
		t.Fatalf("no grant: %+v, %v", a.Grant, err)
	}
	in := Assignment{ID: 1, Grant: &Capacity{CPUs: 4, CoreIDs: []int{0, 1, 2, 3}, Mem: 8 << 30, GPUs: 1, GPUIDs: []string{"1"}, Named: map[string]int{"lic": 1}}}
	b, _ := json.Marshal(in)
	var out Assignment
	if err := json.Unmarshal(b, &out); err != nil || out.Grant == nil || out.Grant.String() != in.Grant.String() {
		t.Fatalf("round trip %s: %+v, %v", b, out.Grant, err)
	}
	if got, want := in.Grant.String(), "cpus=4 mem=8 GiB gpus=1 lic=1"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}

func TestMemoryReason(t *testing.T) {
	r := MemoryReason("max RSS 9.1 GiB over its request of 8 GiB")
	if !IsMemoryReason(r) || r != "memory: max RSS 9.1 GiB over its request of 8 GiB" {
		t.Errorf("MemoryReason = %q", r)
	}
	for _, other := range []string{"", ReasonCeiling, ReasonKilled, "could not start: memory"} {
		if IsMemoryReason(other) {
			t.Errorf("IsMemoryReason(%q) = true", other)
		}
	}
}
