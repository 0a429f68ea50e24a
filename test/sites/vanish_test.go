//go:build e2e

package sites

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A site whose agents stop at their start, before they reach the CLS
// (here: a data root that other users may write, which the agent
// refuses), is degraded, saying where to look, and tried now and then:
// not resubmitted at every poll while the site looks well.
func TestAgentsEndingAtStartDegrade(t *testing.T) {
	need(t, "slurm")
	l := newLogin(t, "127.0.0.1")
	root := ".mq-data-open-" + strconv.Itoa(os.Getpid())
	dir := privateRoot(t, "mquser", root)
	if out, err := exec.Command("su", "mquser", "-c", "chmod 777 "+dir).CombinedOutput(); err != nil {
		t.Fatalf("chmod 777 %s: %v %s", dir, err, out)
	}
	t.Cleanup(func() { exec.Command("su", "mquser", "-c", "rm -rf "+dir).Run() })
	c := startCLS(t)
	c.addSite("open", "slurm", l, "--max", "2", "--walltime", "10m", "--idle", "3s", "--data-root", root)
	for i := range 2 {
		c.must("mqsub", "-q", "q", fmt.Sprintf("j%d", i), "true")
	}
	eventually(t, 3*time.Minute, "the site degraded for placeholders that ended without connecting", func() bool {
		s := c.sites()["open"]
		return s.State == "degraded" && strings.Contains(s.Error, "without connecting to the CLS")
	})
	t.Logf("degraded: %s", c.sites()["open"].Error)
	if log, _ := os.ReadFile(filepath.Join(c.home, "cls.log")); !strings.Contains(string(log), "ended without connecting") {
		t.Errorf("cls.log does not say so:\n%s", tail(string(log), 20))
	}
	if js := c.jobs("Q"); len(js) != 2 {
		t.Errorf("%d jobs queued, want both", len(js))
	}
}
