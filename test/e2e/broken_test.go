//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// TestBrokenAfterCLSKill: a placeholder that said its node cannot run
// jobs is still warned of after the CLS is killed with -9 and started
// again on the home, by cls site list and by mqstat. The placeholder is
// this test, speaking the protocol on the socket.
func TestBrokenAfterCLSKill(t *testing.T) {
	h := newHarness(t)
	h.startCLS()
	h.ok("cls", "site", "add", "grid", "--type", "local")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rwc, err := client.DialSocket(ctx, h.home)
	if err != nil {
		t.Fatal(err)
	}
	ph, err := client.New(ctx, rwc, protocol.RolePlaceholder, "fake-agent")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := client.Do(ctx, ph, protocol.OpRegister, protocol.Register{Site: "grid", Host: "n7", PID: 1, Slots: 1, OutDir: filepath.Join(h.home, "output")})
	if err != nil {
		t.Fatal(err)
	}
	// Answered once the CLS has heard it.
	if _, err := client.Do(ctx, ph, protocol.OpHeartbeat, protocol.Heartbeat{Placeholder: reg.ID, Broken: "job 9 (attempt 1): its processes did not end 60s after SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	h.stopCLS(syscall.SIGKILL, time.Minute)
	ph.Close()

	h.startCLS()
	if out := h.ok("cls", "site", "list"); !strings.Contains(out, "1 broken in the last day") || !strings.Contains(out, "on n7: job 9 (attempt 1)") {
		t.Errorf("cls site list after the restart:\n%s", out)
	}
	h.ok("mqsub", "t", "true")
	if r := h.run("mqstat"); r.code != 0 || !strings.Contains(r.stderr, "1 placeholder(s) stopped taking jobs in the last day") {
		t.Errorf("mqstat after the restart: %s", r)
	}
}
