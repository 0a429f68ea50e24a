package resource

import (
	"strings"
	"testing"
)

func TestParseMem(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string // substring; "" means no error
	}{
		{"8G", 8 * GiB, ""},
		{"8g", 8 * GiB, ""},
		{"8GB", 8 * GiB, ""},
		{"8GiB", 8 * GiB, ""},
		{"8gib", 8 * GiB, ""},
		{"500M", 500 * MiB, ""},
		{"1.5G", 3 * GiB / 2, ""},
		{"4096", 4096 * MiB, ""},
		{"2T", 2 * TiB, ""},
		{"64K", 64 * KiB, ""},
		{"0.5", MiB / 2, ""},
		{"1.", MiB, ""},
		{".5G", GiB / 2, ""},
		{"0.0000001K", 1, ""}, // a fraction of a byte rounds up
		{"8X", 0, "unknown unit"},
		{"8B", 0, "unknown unit"},
		{"8 G", 0, "unknown unit"},
		{"8GX", 0, "unknown unit"},
		{"1e30", 0, "unknown unit"},
		{"-1", 0, "want a number"},
		{"-1G", 0, "want a number"},
		{"", 0, "want a number"},
		{".", 0, "want a number"},
		{"1.2.3G", 0, "want a number"},
		{"G", 0, "want a number"},
		{"0", 0, "more than zero"},
		{"0G", 0, "more than zero"},
		{"9000000000T", 0, "too large"},
		{"99999999999999999999999", 0, "too large"},
	}
	for _, tt := range tests {
		got, err := ParseMem(tt.in)
		if tt.err == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseMem(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseMem(%q) = %d, %v; want one-line error with %q", tt.in, got, err, tt.err)
		}
	}
}

func TestParseCounts(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{{"1", 1}, {"4", 4}, {"0", 0}, {"-1", 0}, {"1.5", 0}, {"", 0}, {"+2", 0}, {"four", 0}, {"99999999999999999999", 0}} {
		got, err := ParseCPUs(tt.in)
		if (err == nil) != (tt.want > 0) || got != tt.want {
			t.Errorf("ParseCPUs(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	if _, err := ParseGPUs("65"); err == nil {
		t.Errorf("ParseGPUs(65): no error")
	}
	if n, err := ParseGPUs("2"); n != 2 || err != nil {
		t.Errorf("ParseGPUs(2) = %d, %v", n, err)
	}
}

func TestParseNamed(t *testing.T) {
	for _, tt := range []struct {
		in   string
		name string
		n    int
	}{
		{"matlab=1", "matlab", 1},
		{"scratch_gb=200", "scratch_gb", 200},
		{"_x=3", "_x", 3},
		{"fpga", "", 0},
		{"1abc=2", "", 0},
		{"a-b=2", "", 0},
		{"=2", "", 0},
		{"lic=0", "", 0},
		{"lic=-1", "", 0},
		{"lic=1.5", "", 0},
		{"mem=4", "", 0},
		{"GPUS=1", "", 0},
	} {
		name, n, err := ParseNamed(tt.in)
		if (err == nil) != (tt.name != "") || name != tt.name || n != tt.n {
			t.Errorf("ParseNamed(%q) = %q, %d, %v; want %q, %d", tt.in, name, n, err, tt.name, tt.n)
		}
	}
}

func TestRequestSetters(t *testing.T) {
	var r Request
	if err := r.SetCPUs("auto"); err != nil || !r.AutoCPUs {
		t.Fatalf("SetCPUs(auto): %v %+v", err, r)
	}
	if err := r.SetCPUs("4"); err != nil || r.AutoCPUs || r.CPUs != 4 {
		t.Fatalf("SetCPUs(4): %v %+v", err, r)
	}
	if err := r.SetMem("AUTO"); err != nil || !r.AutoMem {
		t.Fatalf("SetMem(AUTO): %v %+v", err, r)
	}
	if err := r.SetMem("8G"); err != nil || r.AutoMem || r.Mem != 8*GiB {
		t.Fatalf("SetMem(8G): %v %+v", err, r)
	}
	if err := r.SetCPUs("0"); err == nil || r.CPUs != 4 {
		t.Fatalf("SetCPUs(0) = %v, left %+v", err, r)
	}
	if err := r.AddNamed("lic=2"); err != nil {
		t.Fatal(err)
	}
	if err := r.AddNamed("lic=3"); err == nil {
		t.Fatalf("AddNamed twice: no error")
	}
	r.GPUs = 1
	if got, want := r.String(), "cpus=4 mem=8 GiB gpus=1 lic=2"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
	if got := (Request{}).Cores(); got != 1 {
		t.Errorf("zero Request takes %d cores; want 1", got)
	}
}

func TestFormatMem(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{8 * GiB, "8 GiB"},
		{9*GiB + GiB/10, "9.1 GiB"},
		{500 * MiB, "500 MiB"},
		{3 * GiB / 2, "1.5 GiB"},
		{512, "512 B"},
		{2 * KiB, "2 KiB"},
		{TiB, "1 TiB"},
	} {
		if got := FormatMem(tt.n); got != tt.want {
			t.Errorf("FormatMem(%d) = %q; want %q", tt.n, got, tt.want)
		}
	}
}

// FuzzParseMem checks that whatever ParseMem accepts is positive and
// survives formatting within the rounding of one decimal.
func FuzzParseMem(f *testing.F) {
	for _, s := range []string{"8G", "500M", "1.5G", "4096", "8X", "1e30", "-1", "0.1K", "8GiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseMem(s)
		if err != nil {
			if n != 0 || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseMem(%q) = %d, %q", s, n, err)
			}
			return
		}
		if n <= 0 {
			t.Fatalf("ParseMem(%q) = %d", s, n)
		}
		_ = FormatMem(n)
	})
}

func FuzzParseNamed(f *testing.F) {
	for _, s := range []string{"lic=1", "a=0", "=", "x=99999999999", "é=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, n, err := ParseNamed(s)
		if err != nil {
			return
		}
		if !isIdent(name) || n < 1 {
			t.Fatalf("ParseNamed(%q) = %q, %d", s, name, n)
		}
	})
}

func FuzzParseCPUs(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "1.5", "65536", "65537"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseCPUs(s)
		if err == nil && (n < 1 || n > MaxCPUs) {
			t.Fatalf("ParseCPUs(%q) = %d", s, n)
		}
	})
}
