//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestExportArray: mqsub -V with --array and with -f gives every job the
// submitter's environment (stored once for the submission), each job's
// own -v or "env" over it; the values are not in mqstat's output or the
// CLS's log.
func TestExportArray(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	submit := func(stdin string, args ...string) []int64 {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "mqsub"), args...)
		cmd.Env = append(h.env(), "MYVAR=s3cret-value", "OTHER=o")
		cmd.Dir = h.dir
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("mqsub %v: %v: %s", args, err, errb.String())
		}
		var ids []int64
		for _, f := range strings.Fields(out.String()) {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("mqsub %v printed %q", args, out.String())
			}
			ids = append(ids, id)
		}
		return ids
	}
	want := map[int64]string{}
	for i, id := range submit("", "-V", "-v", "OTHER=own", "--array", "1-3", "arr", "echo [$MYVAR] [$OTHER] [$MQ_ARRAY_INDEX]") {
		want[id] = "[s3cret-value] [own] [" + strconv.Itoa(i+1) + "]\n"
	}
	file := `{"target":"f","command":"echo [$MYVAR] [$OTHER]"}` + "\n" + `{"target":"f","command":"echo [$MYVAR] [$OTHER]","env":{"OTHER":"line"}}` + "\n"
	fids := submit(file, "-V", "-f", "-")
	if len(want) != 3 || len(fids) != 2 {
		t.Fatalf("ids: array %v, file %v", want, fids)
	}
	want[fids[0]], want[fids[1]] = "[s3cret-value] [o]\n", "[s3cret-value] [line]\n"
	for id, w := range want {
		if d := h.waitState(id, "DF", time.Minute); d.State != "D" {
			t.Fatalf("job %d: %s %q", id, d.State, d.Reason)
		}
		if out := h.ok("mqstat", "--cat", strconv.FormatInt(id, 10)); out != w {
			t.Errorf("job %d printed %q, want %q", id, out, w)
		}
		if out := h.ok("mqstat", "-j", strconv.FormatInt(id, 10)); strings.Contains(out, "s3cret") {
			t.Errorf("mqstat -j shows the exported value:\n%s", out)
		}
	}
	if out := h.ok("mqstat", "--json"); strings.Contains(out, "s3cret") {
		t.Error("mqstat --json shows the exported value")
	}
	if b, _ := os.ReadFile(filepath.Join(h.home, "cls.log")); bytes.Contains(b, []byte("s3cret")) {
		t.Error("the CLS's log holds an exported value")
	}
}
