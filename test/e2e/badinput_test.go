//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBadInput feeds one CLS a series of mistakes. Each must produce one
// clear line on stderr ("cmd: message") and the documented exit code, change
// nothing, and leave the CLS serving.
func TestBadInput(t *testing.T) {
	h := newHarness(t)
	cls := h.startCLS("--local", "1")

	// A job that stays waiting, for the delete tests.
	waiting := h.submit("-p", "nothing-yet", "w", "true")

	// stillServing checks the CLS is alive and its job list is exactly want.
	stillServing := func(t *testing.T, want ...int64) {
		t.Helper()
		if cls.exited() {
			t.Fatalf("the CLS exited: %v\n%s", cls.cmd.ProcessState, cls.stderr.String())
		}
		jobs := h.jobs()
		var ids []int64
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Fatalf("jobs now %v, want %v", ids, want)
		}
	}
	wantErr := func(t *testing.T, r result, name string, code int, words ...string) {
		t.Helper()
		t.Logf("%s -> exit %d: %s", name, r.code, strings.TrimSpace(r.stderr))
		if r.code != code {
			t.Errorf("exit %d, want %d (%s)", r.code, code, r)
		}
		oneLineErr(t, name, r)
		for _, w := range words {
			if !strings.Contains(strings.ToLower(r.stderr), strings.ToLower(w)) {
				t.Errorf("stderr %q does not mention %q", r.stderr, w)
			}
		}
	}
	writeFile := func(t *testing.T, name, content string) string {
		p := filepath.Join(h.dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("unknown flag", func(t *testing.T) {
		for _, cmd := range []string{"mqsub", "mqstat", "mqdel", "cls"} {
			r := h.run(cmd, "--bogus", "x", "true")
			wantErr(t, r, cmd, 2, "bogus")
			if !strings.Contains(r.stderr, "unknown") && !strings.Contains(r.stderr, "not defined") {
				t.Errorf("%s: %q does not say the flag is unknown", cmd, r.stderr)
			}
		}
		stillServing(t, waiting)
	})

	t.Run("missing command", func(t *testing.T) {
		wantErr(t, h.run("mqsub", "t1"), "mqsub", 2, "command")
		wantErr(t, h.run("mqsub"), "mqsub", 2, "target")
		wantErr(t, h.run("mqsub", "-p", "t0", "t1"), "mqsub", 2, "command")
		stillServing(t, waiting)
	})

	t.Run("bad JSON line in the middle of -f", func(t *testing.T) {
		// More good lines than one upload chunk before the bad one, so part
		// of the file has already reached the CLS when the error is found.
		var sb strings.Builder
		for i := 1; i <= 2500; i++ {
			fmt.Fprintf(&sb, "{\"target\":\"good%d\",\"command\":\"true\"}\n", i)
		}
		sb.WriteString("{\"target\":\"bad\",\"command\":\n") // line 2501
		for i := 0; i < 10; i++ {
			fmt.Fprintf(&sb, "{\"target\":\"after%d\",\"command\":\"true\"}\n", i)
		}
		p := writeFile(t, "bad.jsonl", sb.String())
		wantErr(t, h.run("mqsub", "-f", p), "mqsub", 1, "line 2501")
		stillServing(t, waiting)
		// The same through stdin, bad line 2 of 3.
		r := h.runIn(h.dir, strings.NewReader("{\"target\":\"a\",\"command\":\"true\"}\nnot json\n{\"target\":\"c\",\"command\":\"true\"}\n"), "mqsub", "-f", "-")
		wantErr(t, r, "mqsub", 1, "line 2")
		stillServing(t, waiting)
	})

	t.Run("unknown key in a JSON line", func(t *testing.T) {
		p := writeFile(t, "key.jsonl", "{\"target\":\"a\",\"command\":\"true\"}\n{\"target\":\"b\",\"prereq\":[\"a\"],\"command\":\"true\"}\n")
		wantErr(t, h.run("mqsub", "-f", p), "mqsub", 1, "line 2", "prereq")
		stillServing(t, waiting)
	})

	t.Run("-f of a missing file", func(t *testing.T) {
		wantErr(t, h.run("mqsub", "-f", filepath.Join(h.dir, "no-such.jsonl")), "mqsub", 1, "no-such.jsonl")
		stillServing(t, waiting)
	})

	t.Run("cycle via -f", func(t *testing.T) {
		p := writeFile(t, "cycle.jsonl", "{\"target\":\"t1\",\"prereqs\":[\"t2\"],\"command\":\"true\"}\n{\"target\":\"t2\",\"prereqs\":[\"t1\"],\"command\":\"true\"}\n")
		wantErr(t, h.run("mqsub", "-f", p), "mqsub", 1, "cycle")
		// A cycle closed through a job already in the metaqueue.
		p = writeFile(t, "cycle2.jsonl", "{\"target\":\"nothing-yet\",\"prereqs\":[\"w\"],\"command\":\"true\"}\n")
		wantErr(t, h.run("mqsub", "-f", p), "mqsub", 1, "cycle")
		wantErr(t, h.run("mqsub", "-p", "w", "nothing-yet", "true"), "mqsub", 1, "cycle")
		stillServing(t, waiting)
	})

	t.Run("a good -f after the failed ones", func(t *testing.T) {
		p := writeFile(t, "good.jsonl", "{\"target\":\"g1\",\"command\":\"true\"}\n{\"target\":\"g2\",\"prereqs\":[\"g1\"],\"command\":\"true\"}\n")
		out := h.ok("mqsub", "-f", p)
		ids := strings.Fields(out)
		if len(ids) != 2 {
			t.Fatalf("mqsub -f printed %q, want 2 ids", out)
		}
		a, _ := strconv.ParseInt(ids[0], 10, 64)
		b, _ := strconv.ParseInt(ids[1], 10, 64)
		h.waitState(b, "D", time.Minute)
		stillServing(t, waiting, a, b)
	})
	// From here on the list holds the waiting job and the two good ones.
	all := []int64{waiting}
	for _, j := range h.jobs() {
		if j.ID != waiting {
			all = append(all, j.ID)
		}
	}

	t.Run("mqdel of an unknown id", func(t *testing.T) {
		wantErr(t, h.run("mqdel", "999999"), "mqdel", 1, "999999")
		wantErr(t, h.run("mqdel", "abc"), "mqdel", 2, "abc")
		stillServing(t, all...)
	})

	t.Run("mqstat -j of an unknown id", func(t *testing.T) {
		wantErr(t, h.run("mqstat", "-j", "999999"), "mqstat", 1, "999999")
		stillServing(t, all...)
	})

	t.Run("mqdel -q of the wrong queue", func(t *testing.T) {
		id := strconv.FormatInt(waiting, 10)
		wantErr(t, h.run("mqdel", "-q", "wrongqueue", id), "mqdel", 1, id, "wrongqueue")
		if d := h.job(waiting); d.State != "W" {
			t.Errorf("job %d is %s after a refused mqdel, want W", waiting, d.State)
		}
		stillServing(t, all...)
	})

	t.Run("command over 128 KiB", func(t *testing.T) {
		// Two words of 70,000 bytes: each is a legal exec argument, joined
		// they are over the limit.
		word := strings.Repeat("a", 70000)
		wantErr(t, h.run("mqsub", "big", "echo", word, word), "mqsub", 2, "131071")
		line, _ := json.Marshal(map[string]string{"target": "big", "command": "echo " + word + word})
		p := writeFile(t, "big.jsonl", string(line)+"\n")
		wantErr(t, h.run("mqsub", "-f", p), "mqsub", 1, "line 1", "131071")
		stillServing(t, all...)
	})

	t.Run("binary garbage on the socket", func(t *testing.T) {
		rnd := rand.New(rand.NewSource(1))
		for i := 0; i < 5; i++ {
			conn, err := net.Dial("unix", h.sock())
			if err != nil {
				t.Fatal(err)
			}
			garbage := make([]byte, 64<<10)
			rnd.Read(garbage)
			if i%2 == 0 {
				garbage = append(garbage, '\n', 0, 0xff, '{', '}', '\n', '[', '\n')
			}
			conn.SetDeadline(time.Now().Add(time.Minute))
			conn.Write(garbage)
			if i == 0 {
				// Each bad line gets an error reply; read one.
				line, err := bufio.NewReader(conn).ReadBytes('\n')
				if err != nil || !bytes.Contains(line, []byte("err")) {
					t.Errorf("reply to garbage: %q, %v; want an error frame", line, err)
				}
			}
			conn.Close()
		}
		// A half-written hello, then hang up.
		if conn, err := net.Dial("unix", h.sock()); err == nil {
			conn.Write([]byte(`{"id":1,"op":"hello","body":{"proto":1,`))
			conn.Close()
		}
		stillServing(t, all...)
	})

	t.Run("frame over 4 MiB on the socket", func(t *testing.T) {
		conn, err := net.Dial("unix", h.sock())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(time.Minute))
		big := append([]byte(`{"id":1,"op":"hello","body":{"client":"`), bytes.Repeat([]byte("x"), 5<<20)...)
		big = append(big, []byte("\"}}\n")...)
		go conn.Write(big) // the CLS may hang up before it has read it all
		line, err := bufio.NewReader(conn).ReadBytes('\n')
		if err != nil || !bytes.Contains(line, []byte("frame")) {
			t.Errorf("reply to a 5 MiB frame: %q, %v; want an error frame about its size", line, err)
		}
		stillServing(t, all...)
	})

	t.Run("no CLS running", func(t *testing.T) {
		h2 := newHarness(t)
		r := h2.run("mqsub", "x", "true")
		wantErr(t, r, "mqsub", 1, "cannot reach the CLS")
		wantErr(t, h2.run("mqstat"), "mqstat", 1, "cannot reach the CLS")
		wantErr(t, h2.run("mqdel", "1"), "mqdel", 1, "cannot reach the CLS")
		// A stale socket (a CLS that died) is no different.
		ln, err := net.Listen("unix", h2.sock())
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
		wantErr(t, h2.run("mqsub", "x", "true"), "mqsub", 1, "cannot reach the CLS")
		// Something else in the socket's place is named, not dialled.
		os.Remove(h2.sock())
		os.WriteFile(h2.sock(), nil, 0o600)
		wantErr(t, h2.run("mqsub", "x", "true"), "mqsub", 1, "is a regular file, not a socket")
	})
}

// TestCommandAtLimit: a command of exactly the limit (128 KiB less the
// exec argument's NUL) runs; one byte more is refused at submission. A
// command must never be accepted and then fail at exec time.
func TestCommandAtLimit(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	for _, n := range []int{128<<10 - 1, 128 << 10} {
		line, _ := json.Marshal(map[string]string{"target": "limit", "command": ": " + strings.Repeat("a", n-2)})
		r := h.runIn(h.dir, strings.NewReader(string(line)+"\n"), "mqsub", "-f", "-")
		if n > 128<<10-1 {
			if r.code != 1 || !strings.Contains(r.stderr, "the limit is 131071") {
				t.Errorf("a command of %d bytes: got %s, want exit 1 naming the limit", n, r)
			}
			continue
		}
		if r.code != 0 {
			t.Errorf("a command of %d bytes is refused: %s", n, r)
			continue
		}
		id, _ := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
		if d := h.waitState(id, "DF", time.Minute); d.State != "D" {
			t.Errorf("BUG: a command of %d bytes (the limit is %d) is accepted but ends %s: %s", n, 128<<10, d.State, d.Reason)
		}
	}
}
