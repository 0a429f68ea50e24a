package site

import (
	"slices"
	"testing"
	"time"
)

// SplitArgs reads --submit-args as a shell would (shellwords, which
// checks itself against a real sh) and refuses control characters.
func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`-A proj -l "h_vmem=2G,mem=1G"`, []string{"-A", "proj", "-l", "h_vmem=2G,mem=1G"}},
		{`--comment='a b' x\ y`, []string{"--comment=a b", "x y"}},
		{"", nil},
	} {
		got, err := SplitArgs(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("SplitArgs(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`"open`, `x\`, "a\x01b"} {
		if _, err := SplitArgs(bad); err == nil {
			t.Errorf("SplitArgs(%q) accepted", bad)
		}
	}
}

func TestAgentWalltime(t *testing.T) {
	for _, tc := range []struct{ batch, want time.Duration }{
		{time.Hour, time.Hour - 3*time.Minute},
		{10 * time.Minute, 9*time.Minute + 30*time.Second},
		{24 * time.Hour, 24*time.Hour - 5*time.Minute},
		{time.Minute, 30 * time.Second},
	} {
		if got := AgentWalltime(tc.batch); got != tc.want {
			t.Errorf("AgentWalltime(%v) = %v, want %v", tc.batch, got, tc.want)
		}
	}
}

func TestPlatforms(t *testing.T) {
	for _, tc := range []struct{ in, os, arch string }{
		{"Linux x86_64", "linux", "amd64"},
		{"Linux aarch64", "linux", "arm64"},
		{"Linux ppc64le", "linux", "ppc64le"},
		{"Darwin arm64", "darwin", "arm64"},
		{"Linux ppc64", "", ""},
		{"SunOS i86pc", "", ""},
		{"garbage", "", ""},
	} {
		goos, goarch, err := Platforms(tc.in)
		if goos != tc.os || goarch != tc.arch || (err == nil) != (tc.os != "") {
			t.Errorf("Platforms(%q) = %s/%s, %v", tc.in, goos, goarch, err)
		}
	}
}
