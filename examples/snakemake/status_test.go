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

// fakeMqstat answers as mqstat --json would for jobs of target
// $FAKE_TARGET, one per state in $FAKE_STATE (space-separated, ids from 1,
// listed in id order), each listed only when -s selects it (E selects P
// jobs too: they are executing, not started yet).
const fakeMqstat = `#!/bin/sh
states=
while [ $# -gt 0 ]; do
	case $1 in -s) states=$2; shift ;; esac
	shift
done
case $states in *E*) states=${states}P ;; esac
id=0 sep='['
for s in $FAKE_STATE; do
	id=$((id + 1))
	case $states in
	*"$s"*) printf '%s{"id":%d,"target":"%s","state":"%s"}\n' "$sep" $id "$FAKE_TARGET" "$s"; sep=, ;;
	esac
done
[ "$sep" = , ] || printf '['
echo ']'
`

// statusScript returns a run of profile/mq-status in a directory, for a
// target whose jobs mqstat (fakeMqstat) lists in the given states: what it
// printed, trimmed.
func statusScript(t *testing.T) func(dir, target, states string) (string, error) {
	t.Helper()
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
	return func(dir, target, states string) (string, error) {
		cmd := exec.Command("sh", script, target)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_STATE="+states, "FAKE_TARGET="+target)
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
}

// TestStatus: mq-status says what Snakemake wants of every state mqstat
// shows, asking mqstat for the one target or (inside a Snakemake run's
// directory) for the run's targets into the cache.
func TestStatus(t *testing.T) {
	status := statusScript(t)
	const target = "smk.tmpabc.rule.7"
	answers := map[string]string{
		"W": "running", "Q": "running", "H": "running", "P": "running", "E": "running",
		"D": "success", "F": "failed", "B": "failed", "X": "failed",
	}
	for _, cached := range []bool{false, true} {
		for state, want := range answers {
			dir := t.TempDir()
			if cached {
				if err := os.MkdirAll(filepath.Join(dir, ".snakemake", "tmpabc"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got, err := status(dir, target, state)
			if err != nil {
				t.Errorf("state %s (cached %v): %v", state, cached, err)
				continue
			}
			if got != want {
				t.Errorf("state %s (cached %v): mq-status says %q, want %q", state, cached, got, want)
			}
		}
	}
}

// TestStatusResubmitted: a job Snakemake resubmits (--restart-times) has
// the target of the attempt that failed; mq-status answers for the newest
// job, also when the cache, written within the second, predates it.
func TestStatusResubmitted(t *testing.T) {
	status := statusScript(t)
	const target = "smk.tmpabc.rule.7"
	answers := map[string]string{"F E": "running", "F Q": "running", "F D": "success", "F F": "failed", "F X": "failed"}
	for _, mode := range []string{"plain", "cached", "stale cache"} {
		for states, want := range answers {
			dir := t.TempDir()
			run := filepath.Join(dir, ".snakemake", "tmpabc")
			if mode != "plain" {
				if err := os.MkdirAll(run, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if mode == "stale cache" {
				// Listed just before the resubmission: the first job only.
				old := `[{"id":1,"target":"` + target + `","state":"` + states[:1] + `"}]` + "\n"
				if err := os.WriteFile(filepath.Join(run, "mq-status.json"), []byte(old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := status(dir, target, states)
			if err != nil {
				t.Errorf("jobs %s (%s): %v", states, mode, err)
				continue
			}
			if got != want {
				t.Errorf("jobs %s (%s): mq-status says %q, want %q", states, mode, got, want)
			}
		}
	}
}
