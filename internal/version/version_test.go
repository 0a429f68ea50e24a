package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{}, "(devel)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3 (go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}},
			"(devel) (0123456789ab-dirty, go1.26.8)"},
		{debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, "v0.1.0 (abc)"},
	} {
		if got := format(&tc.bi); got != tc.want {
			t.Errorf("format(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}
	if s := String(); !strings.Contains(s, "go1.") {
		t.Errorf("String() = %q: no Go version from the test binary's build info", s)
	}
}
