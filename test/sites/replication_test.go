//go:build e2e

package sites

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Job replication across two sites that share no filesystem:
// an SGE site as mquser and a Slurm site as mquser2, each with a data
// root only its account may enter. Job a reads an input that lives on the
// CLS host and writes out/a.txt; its first attempt would run for five
// minutes, any later one for a few seconds. It starts at grid; then slurmy
// is added, runs a filler job that reads the same input (so slurmy holds
// it: Storage Affinity copies only to a site with some of the job's
// bytes), goes idle and gets a copy of a. The copy finishes first: a ends
// Done once with the copy's attempt, the original's process is killed,
// its scratch directory is gone and no out/a.txt is left at grid; the
// output's only replica is slurmy's, its content the copy's; a job that
// reads it (submitted with --no-replicate, so never copied although an
// idle placeholder is there) sees the winner's file and runs once; mqstat
// shows the killed copy in a's history and the waste in --summary (its
// CPU seconds, and the 1 MiB input staged to grid for it alone). Under
// wqr the CLS is SIGKILLed while both attempts run and restarted: the
// race still ends with one winner.
var wasteLine = regexp.MustCompile(`replication waste: 1 killed copies, ([0-9.e+-]+) CPU s, [0-9.e+-]+ s held, 1 MiB staged for them`)

func TestReplicationRace(t *testing.T) {
	need(t, "sge", "slurm")
	for _, pol := range []string{"wqr", "sa"} {
		t.Run(pol, func(t *testing.T) { replicationRace(t, pol, pol == "wqr") })
	}
}

func replicationRace(t *testing.T, pol string, killCLS bool) {
	l := newLogin(t, "127.0.0.1")
	// A fixed SSH endpoint, so the placeholders find a restarted CLS.
	c := startCLSWith(t, nil, []string{"--ssh", freePort(t, "127.0.0.1")})
	l2 := l.as(t, secondUser)
	suffix := "-rep-" + pol
	gridRoot := privateRoot(t, "mquser", ".mq-data-grid"+suffix)
	slurmyRoot := privateRoot(t, secondUser, ".mq-data-slurmy"+suffix)
	c.must("cls", "queue", "set", "bot", "--policy", pol)

	input := make([]byte, 1<<20)
	for i := range input {
		input[i] = byte(i * 13)
	}
	if err := os.MkdirAll(filepath.Join(c.work, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.work, "in", "data"), input, 0o644); err != nil {
		t.Fatal(err)
	}
	pidFile := func(id int64, attempt int) string {
		return filepath.Join(os.TempDir(), "mqrace-"+filepath.Base(c.work)+"-"+strconv.FormatInt(id, 10)+"-"+strconv.Itoa(attempt)+".pid")
	}
	pidPrefix := filepath.Join(os.TempDir(), "mqrace-"+filepath.Base(c.work))
	t.Cleanup(func() {
		m, _ := filepath.Glob(pidPrefix + "-*")
		for _, f := range m {
			os.Remove(f)
		}
	})
	// The first attempt sleeps 300 s, a copy 4 s; each notes its shell's
	// pid (the job's process group) where the test can see it.
	cmdA := `echo $$ > ` + pidPrefix + `-$MQ_JOB_ID-$MQ_ATTEMPT.pid; if [ "$MQ_ATTEMPT" = 1 ]; then sleep 300; else sleep 4; fi; ` +
		`{ echo attempt $MQ_ATTEMPT; wc -c < in/data; } > out/a.txt`
	id := func(out string) int64 {
		n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("mqsub printed %q", out)
		}
		return n
	}
	a := id(c.must("mqsub", "-q", "bot", "--in", "in/data", "--out", "out/a.txt", "a", cmdA))
	// The reader runs long enough for the other site's idle placeholder to
	// ask: under wqr it would get a copy but for --no-replicate.
	reader := id(c.must("mqsub", "-q", "bot", "--no-replicate", "-p", "a", "--in", "out/a.txt", "--out", "out/r.txt", "r", "sleep 6; cp out/a.txt out/r.txt"))
	detail := func(id int64) protocol.JobDetail {
		var d protocol.JobDetail
		if err := json.Unmarshal([]byte(c.must("mqstat", "-j", strconv.FormatInt(id, 10), "--json")), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	c.addSite("grid", "sge", l, "--max", "1", "--walltime", "20m", "--idle", "60s", "--data-root", ".mq-data-grid"+suffix)
	eventually(t, 3*time.Minute, "a running at grid", func() bool {
		d := detail(a)
		return d.State == "E" && d.Site == "grid" && exists(pidFile(a, 1))
	})
	fill := id(c.must("mqsub", "-q", "bot", "--in", "in/data", "fill", "wc -c < in/data"))
	c.addSite("slurmy", "slurm", l2, "--max", "1", "--walltime", "20m", "--idle", "60s", "--data-root", ".mq-data-slurmy"+suffix)
	eventually(t, 3*time.Minute, "a copy of a at slurmy", func() bool {
		d := detail(a)
		if d.State != "E" {
			t.Fatalf("a left E before its copy ran: %+v", d.JobInfo)
		}
		return len(d.Copies) == 1 && d.Copies[0].Site == "slurmy"
	})
	if d := detail(fill); d.State != "D" || d.Site != "slurmy" {
		t.Fatalf("the filler: %+v", d.JobInfo)
	}
	if killCLS {
		c.kill()
		c.restart()
	}
	eventually(t, 3*time.Minute, "a done", func() bool {
		d := detail(a)
		if d.State == "F" {
			t.Fatalf("a failed: %+v", d.JobInfo)
		}
		return d.State == "D"
	})
	d := detail(a)
	if d.Site != "slurmy" || d.Attempts != 2 {
		t.Fatalf("a ended at %s after %d attempts; want the copy (attempt 2) at slurmy", d.Site, d.Attempts)
	}
	if len(d.History) != 1 || d.History[0].Attempt != 1 || d.History[0].Site != "grid" || !strings.HasPrefix(d.History[0].Reason, "killed: attempt 2") {
		t.Fatalf("a's history %+v; want attempt 1 at grid, killed for attempt 2", d.History)
	}
	if len(d.Outputs) != 1 || !producedAt(d.Outputs[0].Replicas, "slurmy", "grid") {
		t.Fatalf("a's outputs %+v; want one replica, at slurmy (and at most its copy staged to grid for the reader)", d.Outputs)
	}
	// The original is killed: its process group is gone.
	b, err := os.ReadFile(pidFile(a, 1))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	eventually(t, time.Minute, "the original's process killed", func() bool {
		return pid > 0 && syscall.Kill(pid, 0) == syscall.ESRCH
	})
	// It left nothing at grid: no output, no scratch directory.
	gridWork := filepath.Join(gridRoot, c.work)
	eventually(t, time.Minute, "the loser's scratch removed", func() bool {
		_, err := os.Stat(filepath.Join(gridWork, ".mq-copies"))
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(filepath.Join(gridWork, "out", "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("the loser left out/a.txt at grid: %v", err)
	}
	if _, err := os.Stat(filepath.Join(slurmyRoot, c.work, ".mq-copies")); !os.IsNotExist(err) {
		t.Fatalf("the winner's scratch left at slurmy: %v", err)
	}
	want := "attempt 2\n" + strconv.Itoa(len(input)) + "\n"
	if got, err := os.ReadFile(filepath.Join(slurmyRoot, c.work, "out", "a.txt")); err != nil || string(got) != want {
		t.Fatalf("out/a.txt at slurmy = %q, %v; want %q", got, err, want)
	}
	// The reader sees the winner's file, and runs once.
	eventually(t, 3*time.Minute, "the reader done", func() bool {
		d := detail(reader)
		if d.State == "F" {
			t.Fatalf("the reader failed: %+v", d.JobInfo)
		}
		return d.State == "D"
	})
	if d := detail(reader); d.Attempts != 1 || len(d.History) != 0 {
		t.Fatalf("the --no-replicate reader ran %d attempts (%+v)", d.Attempts, d.History)
	}
	dest := filepath.Join(t.TempDir(), "r.txt")
	c.must("cls", "files", "get", filepath.Join(c.work, "out", "r.txt"), dest)
	if got, err := os.ReadFile(dest); err != nil || string(got) != want {
		t.Fatalf("the reader's output %q, %v; want the winner's %q", got, err, want)
	}
	// Seed 000's waste: the killed original's CPU seconds (from its late
	// report) and the input staged to grid for it alone (1 MiB).
	var sum string
	eventually(t, time.Minute, "the killed copy's CPU seconds and staged bytes in mqstat --summary", func() bool {
		sum = c.must("mqstat", "--summary")
		m := wasteLine.FindStringSubmatch(sum)
		if m == nil {
			return false
		}
		cpu, err := strconv.ParseFloat(m[1], 64)
		return err == nil && cpu > 0
	})
	if txt := c.must("mqstat", "-j", strconv.FormatInt(a, 10)); !strings.Contains(txt, "killed: attempt 2 of the job finished first") {
		t.Fatalf("mqstat -j:\n%s", txt)
	}
	t.Logf("%s: %s", pol, strings.TrimSpace(sum))
}

// producedAt says whether a job's output has its replica at site and no
// other but, at most, a copy of it at stagedTo: the job's dependent may be
// staged there as soon as the job ends, before the test looks.
func producedAt(rs []protocol.Replica, site, stagedTo string) bool {
	i := slices.IndexFunc(rs, func(r protocol.Replica) bool { return r.Site == site })
	if i < 0 {
		return false
	}
	for _, r := range rs {
		if r.Site != site && (r.Site != stagedTo || r.Size != rs[i].Size || r.SHA256 != rs[i].SHA256) {
			return false
		}
	}
	return len(rs) <= 2
}
