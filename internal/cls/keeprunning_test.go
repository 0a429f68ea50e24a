package cls_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/cls"
)

// A CLS told KeepRunning (cls stop --keep-running) leaves its local
// placeholder running when it stops; without, it stops it. The
// placeholder here is a script that writes its pid and sleeps.
func TestKeepRunning(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			home := shortHome(t)
			agent := filepath.Join(filepath.Dir(home), "agent")
			script := "#!/bin/sh\necho $$ > \"$MQ_HOME/agent.pid\"\nexec sleep 600\n"
			if err := os.WriteFile(agent, []byte(script), 0o700); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c, err := cls.New(ctx, cls.Config{Home: home, Local: 1, AgentExe: agent})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			var pid int
			deadline := time.Now().Add(time.Minute)
			for pid == 0 {
				b, _ := os.ReadFile(filepath.Join(home, "agent.pid"))
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				if pid == 0 && time.Now().After(deadline) {
					t.Fatal("the placeholder did not start in a minute")
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			if keep {
				c.KeepRunning()
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			// Run has returned: a stopped placeholder has been waited for.
			running := syscall.Kill(pid, 0) == nil
			if running != keep {
				t.Errorf("placeholder running after the CLS stopped: %v, want %v", running, keep)
			}
		})
	}
}
