package cls

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestStreamMark: a placeholder's id that only its stream copies still
// name (swept before the database kept the highest id given) is not given
// to a new placeholder after a restart; names that are not stream files
// count for nothing.
func TestStreamMark(t *testing.T) {
	dir, err := os.MkdirTemp("", "mqcls") // short: the socket's path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	ctx := context.Background()
	c, err := New(ctx, Config{Home: home, Notes: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	streams := filepath.Join(c.outputDir(), protocol.StreamDir)
	c.Close()
	if err := os.MkdirAll(streams, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"7-0.mqs", "9-3.mqs", "900-x.mqs", "1000.mqs", "99-0.mqs.tmp"} {
		if err := os.WriteFile(filepath.Join(streams, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err = New(ctx, Config{Home: home, Notes: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.store.Register(ctx, protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 1, OutDir: "/out"})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != 10 {
		t.Errorf("a new placeholder got id %d, want 10: above 9, whose stream copies are kept", r.ID)
	}
}
