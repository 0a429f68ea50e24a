// Package version says which build of mq is running, from the build
// information the Go toolchain embeds (module version, VCS revision), so
// every binary answers --version the same way however it was built.
package version

import (
	"runtime/debug"
	"strings"
)

// String is "VERSION (REVISION[-dirty], GOVERSION)": the main module's
// version ("(devel)" for a build from a work tree, vX.Y.Z for `go
// install ...@vX.Y.Z`) and the VCS revision the build came from, when known.
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	return format(bi)
}

func format(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	var extra []string
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified == "true" {
			rev += "-dirty"
		}
		extra = append(extra, rev)
	}
	if bi.GoVersion != "" {
		extra = append(extra, bi.GoVersion)
	}
	if len(extra) == 0 {
		return v
	}
	return v + " (" + strings.Join(extra, ", ") + ")"
}
