//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestGuideSites runs the marked block of docs/guide/sites.md as written,
// in a home with no ~/.ssh: a CLS with its SSH endpoint on the page's
// port, 2222, that answers before the first cls site add; two remote
// sites added (their hosts are placeholders of the page's: the sites stay
// degraded, saying why, and nothing is submitted there), an on-demand local
// site, the list of all four, and grid removed. It skips, saying so, when
// another program holds the port.
func TestGuideSites(t *testing.T) {
	l, err := net.Listen("tcp", "0.0.0.0:2222")
	if err != nil {
		t.Skipf("the page's port is taken, so its commands cannot run as written: %v", err)
	}
	l.Close()
	h := newHarness(t)
	home := t.TempDir()
	steps := runDocBlocksEnv(t, h, "docs/guide/sites.md", h.dir, []string{"HOME=" + home}, nil)
	hpc := "cls site add hpc --type slurm --ssh me@hpc.example.org:2200 --key ~/.ssh/id_hpc \\\n    --partition short --max 50 --walltime 2h --connect tunnel"
	grid := "cls site add grid --type sge --ssh me@login.grid.example.org --queue all.q \\\n    --min 0 --max 20 --walltime 4h --slots 1 --submit-args \"-P myproject\""
	checkSteps(t, "sites.md", steps, []wantStep{
		{"cls serve --ssh 0.0.0.0:2222 &", 0, nil},
		{"until mqstat >/dev/null 2>&1; do sleep 0.2; done", 0, nil},
		{grid, 0, regexp.MustCompile(`^added site grid \(sge\)\n$`)},
		{hpc, 0, regexp.MustCompile(`^added site hpc \(slurm\)\n$`)},
		{"cls site add here --type local --max 4", 0, regexp.MustCompile(`^added site here \(local\)\n$`)},
		{"cls site list", 0, regexp.MustCompile(`^SITE +TYPE +STATE +MIN-MAX +QUEUED +RUNNING +EXITED +CONNECTED +QUEUE WAIT +WHERE\n` +
			`grid +sge +\S+ +0-20 .* me@login\.grid\.example\.org .*\n` +
			`here +local +\S+ +0-4 .* this host\n` +
			`hpc +slurm +\S+ +0-50 .* me@hpc\.example\.org:2200 \(tunnel\).*\n` +
			`local +local +\S+ +\d+-\d+ .* this host \(cls serve --local \d+\)\n$`)},
		// grid's login host was never reached: its placeholders, if any,
		// could not be listed, and the CLS says so.
		{"cls site remove grid", 0, regexp.MustCompile(`(^|\n)removed site grid\n`)},
	})
	if out := h.ok("cls", "site", "list"); strings.Contains(out, "\ngrid ") {
		t.Errorf("grid is still listed after cls site remove grid:\n%s", out)
	}
	if t.Failed() {
		logSteps(t, steps)
	}
}

// TestGuideSecurity runs the marked block of docs/guide/security.md as
// written, in a home whose ~/.ssh holds the page's two public keys, on a
// CLS serving SSH: the host key printed, the user and admin keys added, a
// placeholder key made 0600 and added, the three listed, and the
// placeholder key removed by its name. Then the user key runs mqstat over
// ssh and the removed key is refused.
func TestGuideSecurity(t *testing.T) {
	requireSSH(t)
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id_ed25519", "me"} {
		if r := h.exec(30*time.Second, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(home, ".ssh", k)); r.code != 0 {
			t.Fatalf("ssh-keygen: %s", r)
		}
	}
	steps := runDocBlocksEnv(t, h, "docs/guide/security.md", h.dir, []string{"HOME=" + home}, nil)
	fp := `SHA256:[A-Za-z0-9+/]{43}`
	checkSteps(t, "security.md", steps, []wantStep{
		{"cls key host", 0, regexp.MustCompile(`^` + regexp.QuoteMeta(s.hostFP) + `\nssh-ed25519 \S+\n$`)},
		{"cls key add --role user ~/.ssh/id_ed25519.pub", 0, regexp.MustCompile(`^added user key ` + fp + ` \S+\n$`)},
		{"cls key add --role admin ~/.ssh/me.pub", 0, regexp.MustCompile(`^added admin key ` + fp + ` \S+\n$`)},
		{"cls key new --role placeholder ~/ph_key", 0, regexp.MustCompile(`^created \S+/ph_key and \S+/ph_key\.pub; added placeholder key ` + fp + ` mq-placeholder-ph_key\n$`)},
		{"cls key list", 0, regexp.MustCompile(`^ROLE +FINGERPRINT +TYPE +NAME\nuser +` + fp + ` .*\nadmin +` + fp + ` .*\nplaceholder +` + fp + ` +ssh-ed25519 +mq-placeholder-ph_key\n$`)},
		{"cls key remove mq-placeholder-ph_key", 0, nil},
	})
	if fi, err := os.Stat(filepath.Join(home, "ph_key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("~/ph_key: %v (%v), want mode 0600", fi, err)
	}
	if r := s.ssh(filepath.Join(home, ".ssh", "id_ed25519"), "mqstat", "-s", "E"); r.code != 0 || !strings.HasPrefix(r.stdout, "ID ") {
		t.Errorf("the user key's ssh mqstat -s E: %s", r)
	}
	if r := s.ssh(filepath.Join(home, "ph_key"), "mqstat"); r.code == 0 {
		t.Errorf("the removed placeholder key still logs in: %s", r)
	}
	if t.Failed() {
		logSteps(t, steps)
	}
}

// TestGuideWorkflowsReplay runs the marked block of
// docs/guide/workflows.md as written, from a directory beside which the
// real traces lie as they do beside the repository: mqsub --wfformat
// prints one id per task, cls plan make plans the last task's target and
// what it needs (the jobs not ended yet), and mqstat lists the replay queue. TestMqsubWfformat
// checks the replayed run itself. It skips when the traces are not there.
func TestGuideWorkflowsReplay(t *testing.T) {
	shared, err := filepath.Abs(filepath.Join(repoRoot(t), "..", "shared"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(shared, "data", "wfinstances", "srasearch-chameleon-10a-001.json")); err != nil {
		t.Skipf("no trace beside the repository: %v", err)
	}
	base := t.TempDir()
	if err := os.Symlink(shared, filepath.Join(base, "shared")); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(base, "mq")
	if err := os.Mkdir(clone, 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.startCLS("--local", "2")
	steps := runDocBlocksIn(t, h, "docs/guide/workflows.md", clone, nil)
	ids := `^1\n`
	for i := 2; i <= 22; i++ {
		ids += fmt.Sprintf(`%d\n`, i)
	}
	checkSteps(t, "workflows.md", steps, []wantStep{
		{"mkdir replay && cd replay", 0, regexp.MustCompile(`^$`)},
		{"mqsub --wfformat ../../shared/data/wfinstances/srasearch-chameleon-10a-001.json \\\n    --time-scale 0.01 --size-scale 0.0001 --target-prefix sra- -q replay", 0, regexp.MustCompile(ids + `$`)},
		// The jobs not ended yet: the first may be done already.
		{"cls plan make sra-merge_ID0000022 --planner heft", 0, regexp.MustCompile(`^planned [0-9]+ jobs of "sra-merge_ID0000022" with heft `)},
		{"mqstat -q replay", 0, regexp.MustCompile(`^ID +QUEUE +TARGET .*\n[0-9]+ +replay +sra-`)},
	})
	if t.Failed() {
		logSteps(t, steps)
	}
}
