//go:build e2e

package sites

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Data staging across two sites that share no filesystem with the CLS
// host or with each other (an SGE site as mquser and a Slurm site as
// mquser2, each with a data root only its account may enter): a two-stage DAG whose first job reads a file that exists only on
// the CLS host and runs at the SGE site, and whose second job reads the
// first one's output and is forced to the Slurm site. Its input is staged
// there, checksums match what the jobs made, the transfers account the
// bytes moved, and `cls files get` brings the final output back
// byte-identical.
//
// The second job is forced to the Slurm site by its estimate: the SGE
// site's walltime (2m) leaves no room for it, and the Slurm site (20m) is
// added only once the first job is done, so the first runs at SGE.
func TestStagingAcrossSites(t *testing.T) {
	need(t, "sge", "slurm")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	// Two administrative domains: grid's account is mquser, slurmy's
	// mquser2, each with a data root the other cannot enter.
	l2 := l.as(t, secondUser)
	gridRoot := privateRoot(t, "mquser", ".mq-data-grid")
	slurmyRoot := privateRoot(t, secondUser, ".mq-data-slurmy")
	if canRead(secondUser, gridRoot) || canRead("mquser", slurmyRoot) {
		t.Fatalf("each site's account can read the other's data root (%s, %s): they are one domain", gridRoot, slurmyRoot)
	}
	c.addSite("grid", "sge", l, "--max", "1", "--walltime", "2m", "--idle", "3s", "--data-root", ".mq-data-grid")

	// An input bigger than stage.LargeBytes, so its transfer measures a
	// bandwidth too.
	input := make([]byte, 3<<20)
	for i := range input {
		input[i] = byte(i*7 + i/4096)
	}
	if err := os.MkdirAll(filepath.Join(c.work, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.work, "in", "seqs.txt"), input, 0o644); err != nil {
		t.Fatal(err)
	}
	inSum := sum(input)
	// p1's output: the input's checksum, then the input.
	mid := append([]byte(inSum+"\n"), input...)
	// p2's output: sha256sum of p1's.
	final := []byte(sum(mid) + "  mid/p1.out\n")

	c.must("mqsub", "--est", "1", "--in", "in/seqs.txt", "--out", "mid/p1.out", "p1",
		"mkdir -p mid && sha256sum in/seqs.txt | cut -c1-64 > mid/p1.out && cat in/seqs.txt >> mid/p1.out")
	c.must("mqsub", "--est", "600", "-p", "p1", "--in", "mid/p1.out", "--out", "out/final.txt", "p2",
		"mkdir -p out && sha256sum mid/p1.out > out/final.txt")
	byTarget := func() map[string]protocol.JobInfo {
		m := map[string]protocol.JobInfo{}
		for _, j := range c.jobs("") {
			m[j.Target] = j
		}
		return m
	}
	eventually(t, 3*time.Minute, "p1 done", func() bool { return byTarget()["p1"].State == "D" })
	c.addSite("slurmy", "slurm", l2, "--max", "1", "--walltime", "20m", "--idle", "3s", "--data-root", ".mq-data-slurmy")
	eventually(t, 3*time.Minute, "p2 done", func() bool {
		j := byTarget()["p2"]
		if j.State == "F" {
			t.Fatalf("p2 failed: %+v", j)
		}
		return j.State == "D"
	})
	jobs := byTarget()
	if jobs["p1"].Site != "grid" || jobs["p2"].Site != "slurmy" {
		t.Fatalf("p1 ran at %q, p2 at %q; want grid, then slurmy", jobs["p1"].Site, jobs["p2"].Site)
	}

	detail := func(id int64) protocol.JobDetail {
		var d protocol.JobDetail
		if err := json.Unmarshal([]byte(c.must("mqstat", "-j", strconv.FormatInt(id, 10), "--json")), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	abs := func(p string) string { return filepath.Join(c.work, p) }
	// Each job's input came by one transfer from where it was, all its
	// bytes; the outputs' checksums are those of what the jobs made.
	for _, tc := range []struct {
		target, in, from, to string
		size                 int
		out                  string
		outSum               string
	}{
		{"p1", "in/seqs.txt", "local", "grid", len(input), "mid/p1.out", sum(mid)},
		{"p2", "mid/p1.out", "grid", "slurmy", len(mid), "out/final.txt", sum(final)},
	} {
		d := detail(jobs[tc.target].ID)
		var moved int64
		for _, tr := range d.Transfers {
			if tr.Error != "" {
				t.Logf("%s: a failed transfer %+v", tc.target, tr)
				continue
			}
			if tr.Path != abs(tc.in) || tr.From != tc.from || tr.To != tc.to {
				t.Errorf("%s: transfer %+v; want %s from %s to %s", tc.target, tr, abs(tc.in), tc.from, tc.to)
			}
			moved += tr.Bytes
		}
		if moved != int64(tc.size) {
			t.Errorf("%s: transfers %+v moved %d bytes; want %d", tc.target, d.Transfers, moved, tc.size)
		}
		if len(d.Outputs) != 1 || d.Outputs[0].Path != abs(tc.out) || d.Outputs[0].SHA256 != tc.outSum {
			t.Errorf("%s: outputs %+v; want %s with SHA-256 %s", tc.target, d.Outputs, abs(tc.out), tc.outSum)
		}
		if len(d.Inputs) != 1 || len(d.Inputs[0].Replicas) < 2 {
			t.Errorf("%s: inputs %+v; want one, with a replica where it was made and where it ran", tc.target, d.Inputs)
		}
	}
	if d := detail(jobs["p1"].ID); d.Inputs[0].SHA256 != inSum {
		t.Errorf("the input's checksum %q; want %s", d.Inputs[0].SHA256, inSum)
	}

	// The final output comes back byte-identical; the CLS host never had it.
	if _, err := os.Stat(abs("out/final.txt")); err == nil {
		t.Fatal("out/final.txt is on the CLS host before cls files get: the sites share its filesystem")
	}
	dest := filepath.Join(t.TempDir(), "final.txt")
	c.must("cls", "files", "get", abs("out/final.txt"), dest)
	if got, err := os.ReadFile(dest); err != nil || !bytes.Equal(got, final) {
		t.Errorf("cls files get: %q, %v; want %q", got, err, final)
	}
	// The catalog lists p1's output at both sites; cls files rm drops
	// grid's replica, its file in grid's data root with it, and the
	// catalog then lists slurmy's alone.
	catalog := func() map[string]protocol.CatalogFile {
		var files []protocol.CatalogFile
		if err := json.Unmarshal([]byte(c.must("cls", "files", "list", "--json", c.work+"/")), &files); err != nil {
			t.Fatal(err)
		}
		m := map[string]protocol.CatalogFile{}
		for _, f := range files {
			m[f.Path] = f
		}
		return m
	}
	places := func(f protocol.CatalogFile) string {
		var ps []string
		for _, r := range f.Replicas {
			ps = append(ps, r.Site)
		}
		return strings.Join(ps, ",")
	}
	if f := catalog()[abs("mid/p1.out")]; f.SHA256 != sum(mid) || !strings.Contains(places(f), "grid") || !strings.Contains(places(f), "slurmy") {
		t.Errorf("cls files list: mid/p1.out %+v; want its checksum, at grid and slurmy", f)
	}
	if _, err := os.Stat(gridRoot + abs("mid/p1.out")); err != nil {
		t.Fatalf("p1's output is not in grid's data root: %v", err)
	}
	c.must("cls", "files", "rm", abs("mid/p1.out"), "--site", "grid")
	if f := catalog()[abs("mid/p1.out")]; places(f) != "slurmy" {
		t.Errorf("after cls files rm --site grid: replicas at %q; want slurmy", places(f))
	}
	if _, err := os.Stat(gridRoot + abs("mid/p1.out")); !os.IsNotExist(err) {
		t.Errorf("cls files rm left grid's copy in its data root (%v)", err)
	}
	if _, err := os.Stat(slurmyRoot + abs("mid/p1.out")); err != nil {
		t.Errorf("cls files rm --site grid took slurmy's copy too: %v", err)
	}

	// Three transfers: the input to grid, p1's output to slurmy, and the
	// final output back (mqstat --summary --json keeps its queues array;
	// the totals are in the text form).
	var n, failed int
	for _, line := range strings.Split(c.must("mqstat", "--summary"), "\n") {
		if strings.HasPrefix(line, "moved: ") {
			fmt.Sscanf(line, "moved: %d transfers", &n)
			if i := strings.LastIndex(line, ", "); i >= 0 {
				fmt.Sscanf(line[i+2:], "%d failed", &failed)
			}
		}
	}
	if n < 3 || failed != 0 {
		t.Errorf("mqstat --summary: %d transfers, %d failed; want at least 3, none failed", n, failed)
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestStagingRefusesChangedOrMissingInput: a user's input that changed on
// the CLS host after submission is never staged in its new form, and one
// deleted behind the CLS's back is not either: each job fails with the
// reason and is never dispatched; a job whose input is intact runs, and
// one that does not make its declared output fails for it.
func TestStagingRefusesChangedOrMissingInput(t *testing.T) {
	need(t, "sge")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(c.work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("changed.txt", "first version\n")
	write("gone.txt", "here at submit\n")
	write("kept.txt", "stays\n")
	c.must("mqsub", "--in", "changed.txt", "changed", "cat changed.txt > ran-changed")
	c.must("mqsub", "--in", "gone.txt", "gone", "cat gone.txt > ran-gone")
	c.must("mqsub", "--in", "kept.txt", "--out", "ran-kept", "kept", "cat kept.txt > ran-kept")
	c.must("mqsub", "--out", "never.txt", "noout", "true") // declares an output it does not make
	// After submission and before any site exists: one file grows, one
	// goes.
	write("changed.txt", "second, longer version\n")
	if err := os.Remove(filepath.Join(c.work, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	c.addSite("grid", "sge", l, "--max", "1", "--walltime", "2m", "--idle", "3s", "--data-root", ".mq-data-faults")
	byTarget := func() map[string]protocol.JobInfo {
		m := map[string]protocol.JobInfo{}
		for _, j := range c.jobs("") {
			m[j.Target] = j
		}
		return m
	}
	eventually(t, 3*time.Minute, "all four ended", func() bool {
		for _, j := range byTarget() {
			if j.State != "D" && j.State != "F" {
				return false
			}
		}
		return len(byTarget()) == 4
	})
	jobs := byTarget()
	for target, want := range map[string]string{"changed": "changed after submission", "gone": "could not be staged"} {
		j := jobs[target]
		if j.State != "F" || !strings.Contains(j.Reason, want) {
			t.Errorf("%s: state %s, reason %q; want failed with %q", target, j.State, j.Reason, want)
		}
		if j.Site != "" {
			t.Errorf("%s: ran at %q; it must never have been dispatched", target, j.Site)
		}
	}
	if j := jobs["kept"]; j.State != "D" || j.Site != "grid" {
		t.Errorf("kept: %+v; want done at grid", j)
	}
	if j := jobs["noout"]; j.State != "F" || j.Site != "grid" || !strings.Contains(j.Reason, "was not created") {
		t.Errorf("noout: state %s at %q, reason %q; want failed at grid: output was not created", j.State, j.Site, j.Reason)
	}
}

// TestStagingInputEditedAndResubmitted: a user's input staged to a site
// for one job, then edited on the CLS host (at the same size) and
// submitted again for another job, reaches the site in its new form: the
// second job never reads the copy of the old one.
func TestStagingInputEditedAndResubmitted(t *testing.T) {
	need(t, "sge")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	c.addSite("grid", "sge", l, "--max", "1", "--walltime", "5m", "--idle", "1m", "--data-root", ".mq-data-faults")
	run := func(target, content string) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(c.work, "params.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		c.must("mqsub", "--in", "params.txt", "--out", target+".out", target, "cat params.txt > "+target+".out")
		var j protocol.JobInfo
		eventually(t, 3*time.Minute, target+" ended", func() bool {
			for _, x := range c.jobs("") {
				if x.Target == target {
					j = x
				}
			}
			return j.State == "D" || j.State == "F"
		})
		if j.State != "D" || j.Site != "grid" {
			t.Fatalf("%s: state %s at %q (%s); want done at grid", target, j.State, j.Site, j.Reason)
		}
		dest := filepath.Join(t.TempDir(), target+".out")
		c.must("cls", "files", "get", target+".out", dest)
		got, err := os.ReadFile(dest)
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}
	if got := run("first", "alpha=0.5\n"); got != "alpha=0.5\n" {
		t.Fatalf("the first job read %q", got)
	}
	if got := run("second", "alpha=0.7\n"); got != "alpha=0.7\n" {
		t.Errorf("the second job read %q; want the edited file, %q", got, "alpha=0.7\n")
	}
}

// TestStagingNodeLocal: a Slurm site declared --node-local (its nodes
// share no filesystem) keeps files per host. A job reading a file that
// exists only on the CLS host gets it on the host its placeholder runs
// on, over that placeholder's own connection to the CLS (the transfer
// goes to site:host, not to the site's login host over SFTP); its output
// is a replica on that host; a dependent job run by the same host reads
// it there without any transfer; `cls files get` brings it back from the
// host, byte-identical.
func TestStagingNodeLocal(t *testing.T) {
	need(t, "slurm")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	l2 := l.as(t, secondUser)
	root := privateRoot(t, secondUser, ".mq-data-nodes")
	c.addSite("nodes", "slurm", l2, "--max", "1", "--walltime", "20m", "--idle", "20s", "--data-root", ".mq-data-nodes", "--node-local")

	input := make([]byte, 5<<20+77) // several chunks of the agent path
	for i := range input {
		input[i] = byte(i*13 + i/999)
	}
	if err := os.MkdirAll(filepath.Join(c.work, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.work, "in", "n.dat"), input, 0o644); err != nil {
		t.Fatal(err)
	}
	mid := append([]byte(sum(input)+"\n"), input...)
	c.must("mqsub", "--in", "in/n.dat", "--out", "mid/n1.out", "n1",
		"mkdir -p mid && sha256sum in/n.dat | cut -c1-64 > mid/n1.out && cat in/n.dat >> mid/n1.out")
	c.must("mqsub", "-p", "n1", "--in", "mid/n1.out", "--out", "out/n2.txt", "n2",
		"mkdir -p out && sha256sum mid/n1.out > out/n2.txt")
	byTarget := func() map[string]protocol.JobInfo {
		m := map[string]protocol.JobInfo{}
		for _, j := range c.jobs("") {
			m[j.Target] = j
		}
		return m
	}
	eventually(t, 4*time.Minute, "n2 done", func() bool {
		j := byTarget()
		if j["n1"].State == "F" || j["n2"].State == "F" {
			t.Fatalf("a job failed: %+v %+v", j["n1"], j["n2"])
		}
		return j["n2"].State == "D"
	})
	jobs := byTarget()
	host := jobs["n1"].Host
	if host == "" || jobs["n1"].Site != "nodes" || jobs["n2"].Host != host {
		t.Fatalf("n1 ran at %s:%s, n2 at %s:%s; want both on one host of nodes", jobs["n1"].Site, host, jobs["n2"].Site, jobs["n2"].Host)
	}
	detail := func(id int64) protocol.JobDetail {
		var d protocol.JobDetail
		if err := json.Unmarshal([]byte(c.must("mqstat", "-j", strconv.FormatInt(id, 10), "--json")), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	abs := func(p string) string { return filepath.Join(c.work, p) }
	d1 := detail(jobs["n1"].ID)
	var moved int64
	for _, tr := range d1.Transfers {
		if tr.Error != "" {
			t.Logf("a failed transfer %+v", tr)
			continue
		}
		if tr.From != "local" || tr.To != "nodes:"+host || tr.Path != abs("in/n.dat") {
			t.Errorf("n1's transfer %+v; want from local to nodes:%s", tr, host)
		}
		moved += tr.Bytes
	}
	if moved != int64(len(input)) {
		t.Errorf("n1's transfers moved %d bytes, want %d", moved, len(input))
	}
	if got, err := os.ReadFile(filepath.Join(root, abs("in/n.dat"))); err != nil || !bytes.Equal(got, input) {
		t.Errorf("the copy in the host's data root: %d bytes, %v", len(got), err)
	}
	if len(d1.Outputs) != 1 || len(d1.Outputs[0].Replicas) != 1 || d1.Outputs[0].Replicas[0].Host != host || d1.Outputs[0].SHA256 != sum(mid) {
		t.Errorf("n1's output %+v; want one replica, on nodes:%s, SHA-256 %s", d1.Outputs, host, sum(mid))
	}
	if d2 := detail(jobs["n2"].ID); len(d2.Transfers) != 0 {
		t.Errorf("n2 ran on the host holding its input, yet: %+v", d2.Transfers)
	}
	dest := filepath.Join(t.TempDir(), "mid.out")
	c.must("cls", "files", "get", abs("mid/n1.out"), dest)
	if got, err := os.ReadFile(dest); err != nil || !bytes.Equal(got, mid) {
		t.Errorf("cls files get from the host: %d bytes, %v", len(got), err)
	}
}

// TestStagingInputDeletedAtSite: a user's input staged to an SGE site for
// one job is deleted there behind the CLS's back; a second job reading it
// at that site is not failed and does not run on nothing: its agent finds
// the file missing, the CLS forgets that replica and hands the job back
// unstarted, stages the file again from the CLS host, and the job runs,
// with no attempt used up.
func TestStagingInputDeletedAtSite(t *testing.T) { staleAtSite(t, false) }

// TestStagingInputSwappedAtSite: the same, with the staged copy replaced
// by other bytes of the same size (as whoever could write the data root
// would): the agent's hash before the command starts tells it apart, the
// job never reads it and runs on the input staged again. What staging
// wrote there is private (0600).
func TestStagingInputSwappedAtSite(t *testing.T) { staleAtSite(t, true) }

func staleAtSite(t *testing.T, swap bool) {
	need(t, "sge")
	l := newLogin(t, "127.0.0.1")
	c := startCLS(t)
	gridRoot := privateRoot(t, "mquser", ".mq-data-stale")
	t.Cleanup(func() { os.RemoveAll(gridRoot + c.work) })
	data := []byte("the shared input\n")
	if err := os.WriteFile(filepath.Join(c.work, "in.txt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	c.addSite("grid", "sge", l, "--max", "1", "--walltime", "2m", "--idle", "30s", "--data-root", ".mq-data-stale")
	byTarget := func() map[string]protocol.JobInfo {
		m := map[string]protocol.JobInfo{}
		for _, j := range c.jobs("") {
			if j.State == "F" {
				t.Fatalf("%s failed: %+v", j.Target, j)
			}
			m[j.Target] = j
		}
		return m
	}
	c.must("mqsub", "--in", "in.txt", "--out", "first.out", "first", "cat in.txt > first.out")
	eventually(t, 3*time.Minute, "first done", func() bool { return byTarget()["first"].State == "D" })
	staged := gridRoot + filepath.Join(c.work, "in.txt")
	if fi, err := os.Stat(staged); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the staged copy at grid: %v, %v; want mode 0600", fi.Mode(), err)
	}
	if swap {
		// Same size, other bytes, through the same inode's owner.
		if err := os.WriteFile(staged, bytes.ToUpper(data), 0o600); err != nil {
			t.Fatalf("swapping the staged copy at grid: %v", err)
		}
	} else if err := os.Remove(staged); err != nil {
		t.Fatalf("the staged copy at grid: %v", err)
	}
	c.must("mqsub", "--in", "in.txt", "--out", "second.out", "second", "cat in.txt > second.out")
	eventually(t, 3*time.Minute, "second done", func() bool { return byTarget()["second"].State == "D" })
	j := byTarget()["second"]
	var d protocol.JobDetail
	if err := json.Unmarshal([]byte(c.must("mqstat", "-j", strconv.FormatInt(j.ID, 10), "--json")), &d); err != nil {
		t.Fatal(err)
	}
	if j.Site != "grid" || len(d.History) != 0 {
		t.Errorf("second: at %q, earlier attempts %+v; want done at grid, no attempt used up", j.Site, d.History)
	}
	var again bool
	for _, tr := range d.Transfers {
		again = again || tr.Error == "" && tr.From == "local" && tr.To == "grid" && tr.Bytes == int64(len(data))
	}
	if !again {
		t.Errorf("second's transfers %+v; want the input staged to grid again", d.Transfers)
	}
	if got, err := os.ReadFile(gridRoot + filepath.Join(c.work, "second.out")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("second's output at grid: %q, %v; want %q", got, err, data)
	}
}

// TestStagingRefusesForeignDataRoot: a site whose data root on its login
// host is a directory another local user (mquser2) owns and anyone can
// write (they could swap a staged input before a job reads it) is refused
// by the CLS: `cls files add` there fails naming the directory, its owner
// and the fix, and nothing is written in it.
func TestStagingRefusesForeignDataRoot(t *testing.T) {
	need(t, "sge")
	u, err := user.Lookup(secondUser)
	if err != nil {
		t.Skipf("no user %s: run scripts/setup.sh as root", secondUser)
	}
	l := newLogin(t, "127.0.0.1")
	root := filepath.Join("/var/tmp", fmt.Sprintf("mq-foreign-%d", time.Now().UnixNano()))
	if out, err := exec.Command("su", secondUser, "-c", "umask 0 && mkdir -m 777 "+root).CombinedOutput(); err != nil {
		t.Fatalf("making %s as %s: %v %s", root, secondUser, err, out)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	c := startCLS(t)
	c.addSite("grid", "sge", l, "--max", "1", "--walltime", "2m", "--idle", "3s", "--data-root", root)
	in := filepath.Join(c.work, "in.txt")
	if err := os.WriteFile(in, []byte("input\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = c.run("cls", "files", "add", in, "--site", "grid")
	want := "data root " + root + " is owned by uid " + u.Uid + ", not by the login user"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "cls site add --data-root") {
		t.Fatalf("cls files add at a foreign data root: %v; want refused with %q", err, want)
	}
	if ents, err := os.ReadDir(root); err != nil || len(ents) != 0 {
		t.Errorf("the foreign data root holds %v (%v); want nothing written", ents, err)
	}
}
