package cls_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/cls"
	"github.com/mq-hpc/mq/protocol"
)

// A placeholder whose heartbeat said its node cannot run jobs is listed
// under its site (cls site list, mqstat's warning, the dashboard) by the
// next CLS on the home too: the node is still broken after a restart.
func TestBrokenSurvivesRestart(t *testing.T) {
	home := shortHome(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := cls.Config{Home: home, Version: "test"}
	const why = "job 9 (attempt 1): its processes did not end 60s after SIGKILL"
	broken := func(c *cls.CLS) []protocol.BrokenPlaceholder {
		t.Helper()
		cl, err := client.Dial(ctx, c.Home(), "", "cls-test")
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		list, err := client.Do(ctx, cl, protocol.OpSiteList, protocol.Empty{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Sites {
			if s.Name == "grid" {
				return s.Broken
			}
		}
		t.Fatalf("no site grid in %+v", list.Sites)
		return nil
	}

	first, stop := runCLS(t, ctx, cfg)
	cl, err := client.Dial(ctx, home, "", "cls-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Do(ctx, cl, protocol.OpSiteAdd, protocol.SiteSpec{Name: "grid", Type: "local", Max: 0}); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	rwc, err := client.DialSocket(ctx, first.Home())
	if err != nil {
		t.Fatal(err)
	}
	ph, err := client.New(ctx, rwc, protocol.RolePlaceholder, "fake-agent")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := client.Do(ctx, ph, protocol.OpRegister, protocol.Register{Site: "grid", Host: "n7", PID: 1, Slots: 1, OutDir: filepath.Join(home, "output")})
	if err != nil {
		t.Fatal(err)
	}
	// The CLS has heard it once the heartbeat is answered.
	if _, err := client.Do(ctx, ph, protocol.OpHeartbeat, protocol.Heartbeat{Placeholder: reg.ID, Broken: why}); err != nil {
		t.Fatal(err)
	}
	if b := broken(first); len(b) != 1 || b[0].ID != reg.ID {
		t.Fatalf("broken %+v before the restart; want placeholder %d", b, reg.ID)
	}
	ph.Close()
	stop()

	second, _ := runCLS(t, ctx, cfg)
	b := broken(second)
	if len(b) != 1 || b[0].ID != reg.ID || b[0].Host != "n7" || b[0].Why != why || time.Since(b[0].At) > time.Hour {
		t.Fatalf("broken %+v after the restart; want placeholder %d on n7, with why", b, reg.ID)
	}
}
