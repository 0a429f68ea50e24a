//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// siteInfo is one site of `cls site list --json`.
func (h *harness) siteInfo(name string) (protocol.SiteInfo, error) {
	h.t.Helper()
	var sl protocol.SiteList
	if err := json.Unmarshal([]byte(h.ok("cls", "site", "list", "--json")), &sl); err != nil {
		return protocol.SiteInfo{}, err
	}
	for _, s := range sl.Sites {
		if s.Name == name {
			return s, nil
		}
	}
	return protocol.SiteInfo{}, fmt.Errorf("no site %s", name)
}

// TestPlaceholderSize: what a site says each placeholder holds reaches
// its agent, which offers it to the CLS (cls site list --json's offered);
// the CLS's own placeholders offer their slots and a share of the
// machine's memory, and no GPUs. The GPUs are declared (this machine has
// none): a local placeholder told it has 4 offers ids 0-3.
func TestPlaceholderSize(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "1", "--slots", "2")
	waitFor(t, time.Minute, func() error {
		s, err := h.siteInfo("local")
		if err == nil && (!strings.HasPrefix(s.Offered, "cpus=2 mem=") || strings.Contains(s.Offered, "gpus")) {
			err = fmt.Errorf("the CLS's own placeholder offers %q; want cpus=2, some memory, no GPUs", s.Offered)
		}
		return err
	})
	h.stopCLS(syscall.SIGTERM, 10*time.Second)

	h.startCLS("--local", "0")
	h.ok("cls", "site", "add", "g", "--type", "local", "--max", "1", "--cpus", "2", "--mem", "1G", "--gpus", "4",
		"--resource", "lic=2", "--idle", "30s")
	if list := h.ok("cls", "site", "list"); !strings.Contains(list, "(each 2 cpus, 1 GiB, 4 GPUs, lic=2)") {
		t.Errorf("cls site list:\n%s", list)
	}
	id := h.submit("nap", "sleep 2")
	waitFor(t, time.Minute, func() error {
		s, err := h.siteInfo("g")
		if err == nil && s.Offered != "cpus=2 mem=1 GiB gpus=0,1,2,3 lic=2" {
			err = fmt.Errorf("site g's placeholder offers %q; want cpus=2 mem=1 GiB gpus=0,1,2,3 lic=2", s.Offered)
		}
		return err
	})
	h.ok("mqwait", fmt.Sprint(id))

	// Sizes are changed in place, and bad ones refused in one line.
	h.ok("cls", "site", "set", "g", "--mem", "2G", "--resource", "none")
	if list := h.ok("cls", "site", "list"); !strings.Contains(list, "(each 2 cpus, 2 GiB, 4 GPUs)") {
		t.Errorf("after cls site set, cls site list:\n%s", list)
	}
	for _, bad := range [][]string{{"--cpus", "0"}, {"--mem", "8X"}, {"--resource", "a-b=1"}, {"--max", "2"}} {
		r := h.run("cls", append([]string{"site", "set", "g"}, bad...)...)
		if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("cls site set g %s: %s; want refused in one line", strings.Join(bad, " "), r)
		}
	}
}
