// Package snakemake holds the Snakemake profile's tests; the profile
// itself is shell (profile/).
package snakemake

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeMqstat answers as mqstat --json would for jobs of target
// $FAKE_TARGET, one per state in $FAKE_STATE (space-separated, ids from 1,
// listed in id order), each listed only when -s selects it (E selects P
// jobs too: they are executing, not started yet).
const fakeMqstat = `#!/bin/sh
if [ -n "${FAKE_DOWN:-}" ] && [ "$(cat "$FAKE_DOWN")" -gt 0 ]; then
	echo $(($(cat "$FAKE_DOWN") - 1)) >"$FAKE_DOWN"
	echo "mqstat: cannot reach the CLS at /h/cls.sock (is cls serve running?): connection refused" >&2
	exit 1
fi
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
// printed, trimmed. env is added to its environment.
func statusScript(t *testing.T, env ...string) func(dir, target, states string) (string, error) {
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
		cmd.Env = append(cmd.Env, env...)
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

// TestStatusRidesOutCLSRestart: Snakemake stops the whole run at a status
// command's first failure, so mq-status asks mqstat again while the CLS
// cannot be reached (restarted under a running workflow), for up to
// $MQ_STATUS_WAIT seconds, and only then fails with mqstat's last error.
func TestStatusRidesOutCLSRestart(t *testing.T) {
	const target = "smk.tmpabc.rule.7"
	for _, cached := range []bool{false, true} {
		down := filepath.Join(t.TempDir(), "down")
		dir := t.TempDir()
		if cached {
			if err := os.MkdirAll(filepath.Join(dir, ".snakemake", "tmpabc"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(down, []byte("2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := statusScript(t, "FAKE_DOWN="+down)(dir, target, "E")
		if err != nil || got != "running" {
			t.Errorf("cached %v: CLS down for 2 asks: %q, %v; want running", cached, got, err)
		}
		if err := os.WriteFile(down, []byte("1000\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, ".snakemake", "tmpabc", "mq-status.json")) // else answered from it
		got, err = statusScript(t, "FAKE_DOWN="+down, "MQ_STATUS_WAIT=1")(dir, target, "E")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || got != "" || strings.Count(string(ee.Stderr), "cannot reach the CLS") != 1 {
			t.Errorf("cached %v: CLS down for good: %q, %v; want exit 1 with mqstat's error once", cached, got, err)
		}
	}
}

// fakeMqsub fails while the count in $FAKE_DOWN is above 0, as mqsub does
// when the CLS cannot be reached (nothing sent), then adds the job; with
// $FAKE_REFUSE it fails as the CLS refusing the job does. Each call is a
// line in $FAKE_CALLS.
const fakeMqsub = `#!/bin/sh
echo "$*" >>"$FAKE_CALLS"
if [ -n "${FAKE_REFUSE:-}" ]; then
	echo "mqsub: queue nosuch does not exist" >&2
	exit 1
fi
if [ "$(cat "$FAKE_DOWN")" -gt 0 ]; then
	echo $(($(cat "$FAKE_DOWN") - 1)) >"$FAKE_DOWN"
	echo "mqsub: cannot reach the CLS at /h/cls.sock (is cls serve running?): connection refused" >&2
	exit 1
fi
echo "mqsub: warning: needs 4 cores" >&2
echo 17
`

// TestSubmitRidesOutCLSRestart: Snakemake fails a job whose submit command
// fails, so mq-submit tries mqsub again while the CLS cannot be reached
// (mqsub then sent nothing), up to $MQ_STATUS_WAIT seconds; a job the CLS
// refused is not tried again, and mqsub's warnings reach Snakemake's log.
func TestSubmitRidesOutCLSRestart(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("profile", "mq-submit"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mqsub"), []byte(fakeMqsub), 0o755); err != nil {
		t.Fatal(err)
	}
	down, calls := filepath.Join(dir, "down"), filepath.Join(dir, "calls")
	for _, tc := range []struct {
		name       string
		down       string
		env        []string
		out, err   string
		calls      int
		wantFailed bool
	}{
		{"restarted", "2", nil, "smk.tmp.abc.rule.7", "needs 4 cores", 3, false},
		{"down for good", "1000", []string{"MQ_STATUS_WAIT=1"}, "", "cannot reach the CLS", 0, true},
		{"refused", "0", []string{"FAKE_REFUSE=1"}, "", "queue nosuch does not exist", 1, true},
	} {
		os.WriteFile(down, []byte(tc.down+"\n"), 0o644)
		os.Remove(calls)
		cmd := exec.Command("sh", script, "-q", "nosuch", "/w/.snakemake/tmp.abc/snakejob.rule.7.sh")
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "FAKE_DOWN="+down, "FAKE_CALLS="+calls)
		cmd.Env = append(cmd.Env, tc.env...)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		b, _ := os.ReadFile(calls)
		n := strings.Count(string(b), "\n")
		if (err != nil) != tc.wantFailed || strings.TrimSpace(o.String()) != tc.out || strings.Count(e.String(), tc.err) != 1 || (tc.calls > 0 && n != tc.calls) {
			t.Errorf("%s: %v, stdout %q, stderr %q, %d mqsub calls; want failed=%v, %q, %q once, %d calls", tc.name, err, o.String(), e.String(), n, tc.wantFailed, tc.out, tc.err, tc.calls)
		}
	}
}

// TestCancelOneCall: Snakemake gives mq-cancel every target of the run and
// two seconds; it deletes them with one mqdel (-t A,B,...), where one
// mqdel per target (hundreds of processes) ran past the two seconds and
// left jobs running after Ctrl-C.
func TestCancelOneCall(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("profile", "mq-cancel"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fake := "#!/bin/sh\necho \"$*\" >>\"$FAKE_CALLS\"\n"
	if err := os.WriteFile(filepath.Join(dir, "mqdel"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for i := 0; i < 300; i++ {
		targets = append(targets, "smk.tmp.abc.rule."+strconv.Itoa(i))
	}
	cmd := exec.Command("sh", append([]string{script}, targets...)...)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "FAKE_CALLS="+calls)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mq-cancel: %v, %s", err, out)
	}
	b, err := os.ReadFile(calls)
	if want := "-Q -t " + strings.Join(targets, ",") + "\n"; err != nil || string(b) != want {
		t.Errorf("mqdel called as %.200q..., want once as %.200q...", b, want)
	}
}

// TestStatusCacheNotThroughLink: the listing is written to a new file
// beside the cache, never through a link someone else put there (in a
// project directory the group may write, a member can make one at the
// name the script would use). The script runs as the process whose pid
// it would have named its file by ($$), with that name a link to a file
// of ours, which must stay as it was.
func TestStatusCacheNotThroughLink(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("profile", "mq-status"))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mqstat"), []byte(fakeMqstat), 0o755); err != nil {
		t.Fatal(err)
	}
	const target = "smk.tmpabc.rule.7"
	dir := t.TempDir()
	run := filepath.Join(dir, ".snakemake", "tmpabc")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The shell waits on its stdin, then becomes the script: same pid.
	cmd := exec.Command("sh", "-c", `read _ && exec sh "$0" "$1"`, script, target)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_STATE=D", "FAKE_TARGET="+target)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(run, "mq-status.json."+strconv.Itoa(cmd.Process.Pid))
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("go\n"))
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != "success" {
		t.Errorf("mq-status says %q, want success", got)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("mq-status wrote through the link at %s: the file it points to holds %q", link, b)
	}
}
