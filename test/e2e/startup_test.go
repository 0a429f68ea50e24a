//go:build e2e

package e2e

import (
	"crypto/sha256"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestTwoCLSRace starts two `cls serve` on one MQ_HOME at the same moment,
// round after round (a new home in some rounds, so both race to make it):
// exactly one serves, the other exits 1 with one line, and the winner,
// killed with kill -9, leaves no lock, socket or pid that stops the next
// round. Every job submitted between rounds is still there at the end.
func TestTwoCLSRace(t *testing.T) {
	h := newHarness(t)
	const rounds = 6
	for round := range rounds {
		if round == 2 {
			os.RemoveAll(h.home) // both make it
		}
		var procs [2]*clsProc
		for i := range procs {
			cmd := exec.Command(filepath.Join(binDir, "cls"), "serve", "--local", "0")
			cmd.Env, cmd.Dir = h.env(), h.dir
			c := &clsProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
			cmd.Stdout, cmd.Stderr = c.stderr, c.stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { cmd.Wait(); close(c.done) }()
			procs[i] = c
		}
		var winner, loser *clsProc
		waitFor(t, 60*time.Second, func() error {
			switch a, b := procs[0].exited(), procs[1].exited(); {
			case a && b:
				t.Fatalf("round %d: both exited: %q, %q", round, procs[0].stderr, procs[1].stderr)
			case a:
				winner, loser = procs[1], procs[0]
			case b:
				winner, loser = procs[0], procs[1]
			default:
				return fmt.Errorf("round %d: neither has exited yet", round)
			}
			conn, err := net.Dial("unix", h.sock())
			if err != nil {
				return err
			}
			return conn.Close()
		})
		if code := loser.cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("round %d: the second cls exited %d", round, code)
		}
		if got, want := loser.stderr.String(), "cls: another CLS is already serving "+h.home+"\n"; got != want {
			t.Errorf("round %d: the second cls said %q, want %q", round, got, want)
		}
		h.cls = winner
		h.ok("mqsub", "t", "true")
		h.stopCLS(syscall.SIGKILL, 30*time.Second)
	}
	h.startCLS("--local", "0")
	if got := h.summary()["default"]["Q"]; got != rounds-2 {
		t.Errorf("%d jobs queued, want %d (those since the home was remade)", got, rounds-2)
	}
}

// TestCLSRefusesDatabases: cls serve on a database it cannot trust exits 1
// with one line naming it, and leaves it as it was: not SQLite, truncated,
// of a newer schema than the binary, or gone while its WAL holds changes
// (SQLite alone would start an empty metaqueue and drop the WAL).
func TestCLSRefusesDatabases(t *testing.T) {
	tests := []struct {
		name string
		harm func(t *testing.T, db string)
		want string
	}{
		{"not sqlite", func(t *testing.T, db string) {
			os.WriteFile(db, []byte("these are not the pages you are looking for\n"), 0o600)
		}, "file is not a database"},
		{"truncated", func(t *testing.T, db string) {
			os.Truncate(db, 3000)
		}, "malformed"},
		{"newer schema", func(t *testing.T, db string) {
			d, err := sql.Open("sqlite", "file:"+db)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if _, err := d.Exec("UPDATE meta SET value = '9999' WHERE key = 'schema'"); err != nil {
				t.Fatal(err)
			}
		}, "metaqueue schema version 9999 is newer than this build's"},
		{"database gone, its WAL left", func(t *testing.T, db string) {
			os.Remove(db)
			os.WriteFile(db+"-wal", []byte("changes a checkpoint never reached"), 0o600)
		}, "it is missing or empty, but"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.startCLS("--local", "0")
			h.ok("mqsub", "t", "true")
			h.stopCLS(syscall.SIGTERM, 30*time.Second)
			db := filepath.Join(h.home, "mq.db")
			tt.harm(t, db)
			before := snapshot(t, h.home)
			r := h.run("cls", "serve", "--local", "0")
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("cls serve: exit %d, %q; want 1 and %q", r.code, r.stderr, tt.want)
			}
			oneLineErr(t, "cls", r)
			if after := snapshot(t, h.home); after != before {
				t.Errorf("the database's files changed:\n%s\nwere\n%s", after, before)
			}
		})
	}
}

// snapshot is the database's files in home: each one's size and hash.
func snapshot(t *testing.T, home string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range []string{"mq.db", "mq.db-wal"} {
		data, err := os.ReadFile(filepath.Join(home, name))
		if err != nil {
			fmt.Fprintf(&b, "%s: none\n", name)
			continue
		}
		fmt.Fprintf(&b, "%s: %d bytes, sha256 %x\n", name, len(data), sha256.Sum256(data))
	}
	return b.String()
}

// TestCLSReadOnlyHome: an MQ_HOME on a file system mounted read-only (a
// full quota's emergency remount, a snapshot) is refused with one line,
// its database untouched. It needs to mount a tmpfs, so it runs as root
// only.
func TestCLSReadOnlyHome(t *testing.T) {
	h := newHarness(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting a read-only file system needs root")
	}
	h.startCLS("--local", "0")
	h.ok("mqsub", "t", "true")
	h.stopCLS(syscall.SIGTERM, 30*time.Second)
	before := snapshot(t, h.home)

	// The home, copied onto a tmpfs mounted over a directory of the
	// harness's, then remounted read-only.
	mnt := filepath.Join(h.dir, "ro")
	os.Mkdir(mnt, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	home := filepath.Join(mnt, "h")
	if out, err := exec.Command("cp", "-a", h.home, home).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	env := append(h.env(), "MQ_HOME="+home) // the later one wins
	r, err := runBin(90*time.Second, env, h.dir, nil, "cls", "serve", "--local", "0")
	if err == nil || r.code != 1 || !strings.Contains(r.stderr, "read-only file system") {
		t.Fatalf("cls serve on a read-only home: exit %d, %q, %v", r.code, r.stderr, err)
	}
	oneLineErr(t, "cls", r)
	if after := snapshot(t, home); after != before {
		t.Errorf("the database's files differ from the home's:\n%s\nwere\n%s", after, before)
	}
}
