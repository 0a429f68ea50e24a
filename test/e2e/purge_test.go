//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ended jobs purged with cls purge are gone from every listing, with their
// output files (a -o file of the user's stays); a job submitted after,
// needing a purged job's target, still runs; a live job's prerequisite is
// kept. Under the default output, streams, the stream file the purged
// job's output lay in stays while a kept job's output lies there too, and
// reads.
func TestPurgeEndedJobs(t *testing.T) {
	for _, mode := range []string{"streams", "files"} {
		t.Run(mode, func(t *testing.T) { testPurgeEndedJobs(t, mode) })
	}
}

func testPurgeEndedJobs(t *testing.T, mode string) {
	h := newHarness(t)
	h.startCLS("--local", "1", "--output", mode)
	userOut := filepath.Join(t.TempDir(), "mine.log")
	a := h.submit("-o", userOut, "prep", "echo prepared; echo noise >&2")
	b := h.submit("-p", "prep", "use", "echo used")
	held := h.submit("-H", "-p", "use", "later", "true")
	h.waitState(b, "D", time.Minute)
	da := h.waitState(a, "D", time.Minute)
	if da.Stdout == "" {
		t.Fatalf("job %d names no stdout file", a)
	}
	if mode == "files" {
		waitFile(t, da.Stdout, 30*time.Second)
	} else if da.StdoutStream == nil || h.job(b).StdoutStream == nil {
		t.Fatalf("jobs %d and %d: stdout streams %+v, %+v", a, b, da.StdoutStream, h.job(b).StdoutStream)
	}

	if r := h.run("cls", "purge", "--ended-before", "0", "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "would purge 1 job (") || !strings.Contains(r.stdout, "kept 1") {
		t.Fatalf("cls purge --dry-run: %s", r)
	}
	r := h.run("cls", "purge", "--ended-before", "0")
	if r.code != 0 || !strings.Contains(r.stdout, "purged 1 job (") || !strings.Contains(r.stdout, "kept 1") {
		t.Fatalf("cls purge: %s", r)
	}
	if r := h.run("mqstat", "-j", fmt.Sprint(a)); r.code != 1 || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("mqstat -j of a purged job: %s", r)
	}
	listing := h.ok("mqstat", "-a")
	for _, line := range strings.Split(listing, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == fmt.Sprint(a) {
			t.Errorf("mqstat -a lists the purged job:\n%s", listing)
		}
	}
	if r := h.run("mqstat", "--cat", fmt.Sprint(a)); r.code != 1 || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("mqstat --cat of a purged job: %s", r)
	}
	if mode == "files" {
		if _, err := os.Stat(da.Stdout); !os.IsNotExist(err) {
			t.Errorf("the purged job's stdout %s: %v", da.Stdout, err)
		}
	} else {
		// The kept job's output, maybe in the same stream file, still reads.
		if got := h.ok("mqstat", "--cat", fmt.Sprint(b)); got != "used\n" {
			t.Errorf("mqstat --cat of the kept job %d after the purge printed %q", b, got)
		}
		if db := h.job(b); db.StdoutStream == nil {
			t.Errorf("the kept job %d lost its stdout stream", b)
		} else if _, err := os.Stat(db.StdoutStream.Path); err != nil {
			t.Errorf("the kept job's stream file: %v", err)
		}
	}
	if got := readFile(t, userOut); !strings.Contains(got, "prepared\n") { // stderr too, without -e
		t.Errorf("the user's -o file after purge: %q", got)
	}

	// A dependent submitted after the purge: prep still counts as done.
	late := h.submit("-p", "prep", "again", "echo again")
	h.waitState(late, "D", time.Minute)
	if got := h.ok("mqstat", "--cat", fmt.Sprint(late)); got != "again\n" {
		t.Errorf("mqstat --cat of a job run after the purge printed %q", got)
	}
	next := h.submit("new", "true")
	if next <= late || next <= held {
		t.Errorf("a new job got id %d", next)
	}
	// b is kept while held waits on its target; released and done, it goes.
	h.ok("mqrls", fmt.Sprint(held))
	h.waitState(held, "D", time.Minute)
	h.waitState(next, "D", time.Minute)
	if r := h.run("cls", "purge", "--ended-before", "0", "-t", "use"); r.code != 0 || !strings.Contains(r.stdout, "purged 1 job (") {
		t.Fatalf("cls purge -t use: %s", r)
	}
	if r := h.run("cls", "purge", "--ended-before", "-5"); r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("cls purge --ended-before -5: %s", r)
	}
}
