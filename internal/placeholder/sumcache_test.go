package placeholder

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/sumcache"
	"github.com/mq-hpc/mq/protocol"
)

// A staged input read by job after job is hashed once while it stays the
// same file; written in place (same size, so only the bytes tell) or
// replaced by rename, it is hashed again and refused.
func TestCheckSumCachedByIdentity(t *testing.T) {
	root := t.TempDir()
	a := New(Config{DataRoot: root, Site: "s1", Host: "n1"})
	a.sums.Now = func() time.Time { return time.Now().Add(time.Hour) } // every file has settled
	f := protocol.AssignedFile{Path: "/proj/in.txt", Size: 5, SHA256: sumOf("hello")}
	full := filepath.Join(root, "proj", "in.txt")
	write(t, full, "hello")
	ctx := context.Background()
	if why := a.checkSum(ctx, f); why != "" {
		t.Fatalf("the staged file: %s", why)
	}
	id, ok := sumcache.Identify(full)
	if !ok || !a.sums.Checked(full, id, sumOf("hello")) {
		t.Fatal("a file whose hash matched is not remembered")
	}
	if why := a.checkSum(ctx, f); why != "" {
		t.Fatalf("the same file again: %s", why)
	}

	// Written in place with bytes of the same size, in a later tick of
	// the file clock than the write that was hashed.
	waitFileTick(t, root, id.Changed().UnixNano())
	if err := os.WriteFile(full, []byte("HELLO"), 0o600); err != nil {
		t.Fatal(err)
	}
	if why := a.checkSum(ctx, f); !strings.Contains(why, "has SHA-256 "+sumOf("HELLO")) {
		t.Fatalf("a file written in place after it was checked: %q, want the SHA-256 refusal", why)
	}

	// Put back, checked, then replaced by rename.
	write(t, full, "hello")
	if why := a.checkSum(ctx, f); why != "" {
		t.Fatalf("the file put back: %s", why)
	}
	other := filepath.Join(root, "proj", "other")
	write(t, other, "HELLO")
	if err := os.Rename(other, full); err != nil {
		t.Fatal(err)
	}
	if why := a.checkSum(ctx, f); !strings.Contains(why, "has SHA-256 "+sumOf("HELLO")) {
		t.Fatalf("a file replaced by rename after it was checked: %q, want the SHA-256 refusal", why)
	}
}

// waitFileTick waits until the filesystem's clock has passed ctime, so a
// write now gets other times than the one at ctime.
func waitFileTick(t *testing.T, dir string, ctime int64) {
	t.Helper()
	probe := filepath.Join(dir, "tick")
	for deadline := time.Now().Add(time.Minute); ; {
		write(t, probe, "x")
		if id, ok := sumcache.Identify(probe); ok && id.Changed().UnixNano() > ctime {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the file clock did not move in a minute")
		}
		runtime.Gosched()
	}
}

// A file changed within the last second is hashed at every check, not
// remembered: a write in the same tick of the file clock would not show.
func TestCheckSumNotRememberedWhileFresh(t *testing.T) {
	root := t.TempDir()
	a := New(Config{DataRoot: root, Site: "s1", Host: "n1"})
	full := filepath.Join(root, "in.txt")
	write(t, full, "hello")
	if why := a.checkSum(context.Background(), protocol.AssignedFile{Path: "/in.txt", Size: 5, SHA256: sumOf("hello")}); why != "" {
		t.Fatal(why)
	}
	if id, ok := sumcache.Identify(full); !ok || a.sums.Checked(full, id, sumOf("hello")) {
		t.Fatal("a file written just now was remembered as checked")
	}
}
