package site

import (
	"slices"
	"testing"
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
