// Package snakemake holds the Snakemake profile's tests; the profile
// itself is shell (profile/).
package snakemake

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeMqstat answers as mqstat --json would for one job of target
// $FAKE_TARGET in state $FAKE_STATE, listed only when -s selects it (E
// selects P jobs too: they are executing, not started yet).
const fakeMqstat = `#!/bin/sh
states=
while [ $# -gt 0 ]; do
	case $1 in -s) states=$2; shift ;; esac
	shift
done
case $FAKE_STATE in P) case $states in *E*) states=${states}P ;; esac ;; esac
case $states in
*"$FAKE_STATE"*) printf '[{"id":1,"target":"%s","state":"%s"}]\n' "$FAKE_TARGET" "$FAKE_STATE" ;;
*) echo '[]' ;;
esac
`

// TestStatus: mq-status says what Snakemake wants of every state mqstat
// shows, asking mqstat for the one target or (inside a Snakemake run's
// directory) for the run's targets into the cache.
func TestStatus(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh:", err)
	}
	script, err := filepath.Abs(filepath.Join("profile", "mq-status"))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mqstat"), []byte(fakeMqstat), 0o755); err != nil {
		t.Fatal(err)
	}
	const target = "smk.tmpabc.rule.7"
	want := map[string]string{
		"W": "running", "Q": "running", "H": "running", "P": "running", "E": "running",
		"D": "success", "F": "failed", "B": "failed", "X": "failed",
	}
	for _, cached := range []bool{false, true} {
		for state, status := range want {
			dir := t.TempDir()
			if cached {
				if err := os.MkdirAll(filepath.Join(dir, ".snakemake", "tmpabc"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("sh", script, target)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_STATE="+state, "FAKE_TARGET="+target)
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("state %s (cached %v): %v", state, cached, err)
				continue
			}
			if got := strings.TrimSpace(string(out)); got != status {
				t.Errorf("state %s (cached %v): mq-status says %q, want %q", state, cached, got, status)
			}
		}
	}
}
