//go:build e2e

package sites

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestStagingOutputLinks: at a site with a data root, jobs declare
// outputs that are symbolic links. One linking a file of the job's
// directory (relative) and one linking it by its absolute path are staged
// as that file: cls files get brings each back over SFTP, which follows
// no link. One linking /etc/passwd (another user's) and one linking
// /etc/shadow fail their jobs with a reason naming the link; nothing of
// theirs is recorded.
func TestStagingOutputLinks(t *testing.T) {
	f := newFaultSetup(t)
	c := f.c
	c.must("mqsub", "--out", "rel.dat", "rel", `mkdir -p run-3 && echo result > run-3/result.dat && ln -s run-3/result.dat rel.dat`)
	c.must("mqsub", "--out", "abs.dat", "abs", `mkdir -p run-4 && echo result > run-4/result.dat && ln -s "$PWD/run-4/result.dat" abs.dat`)
	c.must("mqsub", "--out", "passwd.dat", "others", "ln -s /etc/passwd passwd.dat")
	c.must("mqsub", "--out", "shadow.dat", "shadow", "ln -s /etc/shadow shadow.dat")
	ended := map[string]protocol.JobInfo{}
	eventually(t, 4*time.Minute, "the four jobs ended", func() bool {
		for _, j := range c.jobs("") {
			if j.State == "D" || j.State == "F" {
				ended[j.Target] = j
			}
		}
		return len(ended) == 5 // warm, rel, abs, others, shadow
	})
	for _, target := range []string{"rel", "abs"} {
		if j := ended[target]; j.State != "D" {
			t.Errorf("%s: %s (%s); want done", target, j.State, j.Reason)
		}
	}
	for _, name := range []string{"rel.dat", "abs.dat"} {
		dest := filepath.Join(t.TempDir(), name)
		if _, err := c.run("cls", "files", "get", filepath.Join(c.work, name), dest); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if b, err := os.ReadFile(dest); err != nil || string(b) != "result\n" {
			t.Errorf("%s got back: %q, %v; want the linked file's content", name, b, err)
		}
		if fi, err := os.Lstat(f.root + filepath.Join(c.work, name)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s at slurmy: %v, %v; want a regular file in place of the link", name, fi, err)
		}
	}
	for target, want := range map[string]string{
		"others": `passwd.dat at site slurmy (host `,
		"shadow": `shadow.dat at site slurmy (host `,
	} {
		j := ended[target]
		if j.State != "F" || !strings.Contains(j.Reason, want) || !strings.Contains(j.Reason, "is a symbolic link to \"/etc/") {
			t.Errorf("%s: %s (%s); want failed, naming the link", target, j.State, j.Reason)
		}
		if _, err := c.run("cls", "files", "get", filepath.Join(c.work, map[string]string{"others": "passwd.dat", "shadow": "shadow.dat"}[target]), filepath.Join(t.TempDir(), "x")); err == nil {
			t.Errorf("%s: its output was recorded", target)
		}
	}
}
