//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/protocol"
)

// streamFiles lists the output area's files by the placeholder whose
// stream file each is; a file that is no stream file fails the test.
func streamFiles(t *testing.T, home string) map[int64][]string {
	t.Helper()
	byPH := map[int64][]string{}
	out := filepath.Join(home, "output")
	err := filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ph, ok := protocol.StreamFileOwner(d.Name())
		if !ok || filepath.Dir(path) != filepath.Join(out, protocol.StreamDir) {
			t.Errorf("output area holds %s, not a stream file", path)
		}
		byPH[ph] = append(byPH[ph], d.Name())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return byPH
}

// TestStreamsManyJobs: 200 echo jobs on two local placeholders writing
// streams leave at most 4 files per placeholder in the output area, and
// mqstat --cat of each prints its line; --stderr and --follow read
// through the index too.
func TestStreamsManyJobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "2", "--output", "streams")
	r := h.run("mqsub", "-b", "--array", "1-200", "t", `echo job-$MQ_JOB_ID; [ $MQ_ARRAY_INDEX = 7 ] && echo err-$MQ_JOB_ID >&2; true`)
	ids := strings.Fields(r.stdout)
	if r.code != 0 || len(ids) != 200 {
		t.Fatalf("mqsub --array 1-200: %s", r)
	}
	byPH := streamFiles(t, h.home)
	if len(byPH) == 0 || len(byPH) > 2 {
		t.Errorf("stream files of %d placeholders, want 1 or 2: %v", len(byPH), byPH)
	}
	for ph, files := range byPH {
		if len(files) > 4 {
			t.Errorf("placeholder %d left %d files: %v", ph, len(files), files)
		}
	}
	for _, id := range ids {
		if got := h.ok("mqstat", "--cat", id); got != "job-"+id+"\n" {
			t.Errorf("mqstat --cat %s printed %q", id, got)
		}
	}
	if got := h.ok("mqstat", "--cat", ids[6], "--stderr"); got != "err-"+ids[6]+"\n" {
		t.Errorf("mqstat --cat %s --stderr printed %q", ids[6], got)
	}
	if got := h.ok("mqstat", "--cat", ids[0], "--stderr"); got != "" {
		t.Errorf("mqstat --cat %s --stderr of an empty stderr printed %q", ids[0], got)
	}
	if got := h.ok("mqstat", "--cat", ids[9], "--follow"); got != "job-"+ids[9]+"\n" {
		t.Errorf("mqstat --cat %s --follow printed %q", ids[9], got)
	}
	// -o and -e files are written beside the stream.
	o, e := filepath.Join(h.dir, "o.txt"), filepath.Join(h.dir, "e.txt")
	tee := strconv.FormatInt(h.submit("-b", "-o", o, "-e", e, "tee", "echo to-o; echo to-e >&2"), 10)
	if got, gotErr := readFile(t, o), readFile(t, e); got != "to-o\n" || gotErr != "to-e\n" {
		t.Errorf("-o, -e files hold %q, %q", got, gotErr)
	}
	if got := h.ok("mqstat", "--cat", tee); got != "to-o\n" {
		t.Errorf("mqstat --cat of a job with -o printed %q", got)
	}
	// Followed from before it starts: the output comes whole at its end.
	id := h.submit("f", "sleep 1; echo followed")
	if got := h.ok("mqstat", "--cat", strconv.FormatInt(id, 10), "--follow"); got != "followed\n" {
		t.Errorf("mqstat --cat --follow of a running job printed %q", got)
	}
}

// TestStreamsKill9: a local placeholder killed while its job's output is
// in its stream file, the file's tail torn: the next placeholder cuts the
// torn tail on reopening the directory, and the job's attempt, never
// reported, is run again; mqstat --cat shows the rerun's whole output,
// never the torn one's.
func TestStreamsKill9(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "1", "--output", "streams")
	// Attempt 1 writes two chunks' worth and hangs; attempt 2 says done.
	id := h.submit("k", `if [ "$MQ_ATTEMPT" = 1 ]; then head -c 150000 /dev/zero | tr '\0' a; sleep 600; fi; echo done-$MQ_ATTEMPT`)
	ids := strconv.FormatInt(id, 10)
	dir := filepath.Join(h.home, "output", protocol.StreamDir)
	var victim string
	waitFor(t, 30*time.Second, func() error {
		names, _ := filepath.Glob(filepath.Join(dir, "*.mqs"))
		for _, n := range names {
			if fi, err := os.Stat(n); err == nil && fi.Size() >= 2*(outstream.ChunkSize+outstream.HeaderSize) {
				victim = n
				return nil
			}
		}
		return errors.New("the job's first chunks are not in a stream file yet")
	})
	agents := h.agents()
	if len(agents) != 1 {
		t.Fatalf("%d local placeholders, want 1", len(agents))
	}
	if err := syscall.Kill(agents[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, func() error {
		if alive(agents[0]) {
			return errors.New("the placeholder still runs")
		}
		return nil
	})
	// Its last write torn: half a chunk on disk.
	fi, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	torn := fi.Size() - outstream.ChunkSize/2
	if err := os.Truncate(victim, torn); err != nil {
		t.Fatal(err)
	}
	d := h.waitState(id, "D", 60*time.Second)
	if d.Attempts < 2 {
		t.Errorf("job done in %d attempts, want its torn attempt run again", d.Attempts)
	}
	if got := h.ok("mqstat", "--cat", ids); got != fmt.Sprintf("done-%d\n", d.Attempts) {
		t.Errorf("mqstat --cat printed %q", protocol.ClipText(got, 80))
	}
	// The victim's file is cut at its last whole chunk.
	waitFor(t, 30*time.Second, func() error {
		fi, err := os.Stat(victim)
		if err != nil {
			return err
		}
		if fi.Size() >= torn {
			return fmt.Errorf("%s is %d bytes, its torn tail not cut", victim, fi.Size())
		}
		f, err := os.Open(victim)
		if err != nil {
			return err
		}
		defer f.Close()
		s := outstream.NewScanner(f, fi.Size())
		for {
			_, err := s.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s after recovery: %w", victim, err)
			}
		}
	})
}

// TestSiteOutputMode: a site added with --output files has its
// placeholders keep a file per output though the CLS streams (cls site
// list says so); set back to streams, its next placeholder writes stream
// files. mqstat --cat reads either.
func TestSiteOutputMode(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	h.ok("cls", "site", "add", "filesite", "--type", "local", "--max", "1", "--idle", "2s", "--output", "files")
	if list := h.ok("cls", "site", "list"); !strings.Contains(list, "(output files)") {
		t.Errorf("cls site list does not show the site's output mode:\n%s", list)
	}
	id := h.submit("t", "echo in-a-file")
	h.waitState(id, "D", 2*time.Minute)
	if got := h.ok("mqstat", "--cat", idStr(id)); got != "in-a-file\n" {
		t.Errorf("mqstat --cat %d printed %q", id, got)
	}
	if _, err := os.Stat(filepath.Join(h.home, "output", strconv.FormatInt(id/1000, 10), fmt.Sprintf("%d.1.out", id))); err != nil {
		t.Errorf("the job's output is not a file of its own: %v", err)
	}
	if names, _ := filepath.Glob(filepath.Join(h.home, "output", protocol.StreamDir, "*.mqs")); len(names) != 0 {
		t.Errorf("stream files under --output files: %v", names)
	}

	h.ok("cls", "site", "set", "filesite", "--output", "streams")
	if list := h.ok("cls", "site", "list"); !strings.Contains(list, "(output streams)") {
		t.Errorf("cls site list after set --output streams:\n%s", list)
	}
	// The placeholder that ran the first job idles out (2 s); the next
	// one hears streams when it registers.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var l protocol.SiteList
		if err := json.Unmarshal([]byte(h.ok("cls", "site", "list", "--json")), &l); err != nil {
			t.Fatal(err)
		}
		idle := false
		for _, si := range l.Sites {
			if si.Name == "filesite" && si.Running == 0 && si.Connected == 0 {
				idle = true
			}
		}
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the site's placeholder has not idled out: %+v", l)
		}
		time.Sleep(100 * time.Millisecond)
	}
	id2 := h.submit("t", "echo in-a-stream")
	h.waitState(id2, "D", 2*time.Minute)
	if got := h.ok("mqstat", "--cat", idStr(id2)); got != "in-a-stream\n" {
		t.Errorf("mqstat --cat %d printed %q", id2, got)
	}
	if js := h.ok("mqstat", "-j", idStr(id2), "--json"); !strings.Contains(js, `"stdout_stream"`) {
		t.Errorf("job %d ran on a placeholder started after set --output streams, but its stdout is not in a stream: %s", id2, js)
	}
}

// TestQueueOutputFiles: under the default streams, a job of a queue set
// to --output files keeps a file per output (cls queue list says so),
// while a job of another queue on the same placeholder streams; mqstat
// --cat reads both.
func TestQueueOutputFiles(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "1")
	h.ok("cls", "queue", "set", "tool", "--output", "files")
	if list := h.ok("cls", "queue", "list"); !strings.Contains(list, "tool: a job keeps a file per stdout and stderr") {
		t.Errorf("cls queue list does not show the queue's output mode:\n%s", list)
	}
	inFile := h.submit("-q", "tool", "t", "echo in-a-file")
	inStream := h.submit("t2", "echo in-a-stream")
	h.waitState(inFile, "D", 2*time.Minute)
	h.waitState(inStream, "D", 2*time.Minute)
	for id, want := range map[int64]string{inFile: "in-a-file\n", inStream: "in-a-stream\n"} {
		if got := h.ok("mqstat", "--cat", idStr(id)); got != want {
			t.Errorf("mqstat --cat %d printed %q, want %q", id, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(h.home, "output", strconv.FormatInt(inFile/1000, 10), fmt.Sprintf("%d.1.out", inFile))); err != nil {
		t.Errorf("the files queue's job has no output file of its own: %v", err)
	}
	if js := h.ok("mqstat", "-j", idStr(inFile), "--json"); strings.Contains(js, `"stdout_stream"`) {
		t.Errorf("the files queue's job's stdout is in a stream: %s", js)
	}
	if js := h.ok("mqstat", "-j", idStr(inStream), "--json"); !strings.Contains(js, `"stdout_stream"`) {
		t.Errorf("the default queue's job's stdout is not in a stream: %s", js)
	}
}
