//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/driver"
)

// TestDriverLikeOSExec: through a real CLS and its local placeholders, a
// job's stdout and stderr read through the driver equal, byte for byte,
// what os/exec and a local-mode driver get from the same line; a Cmd's
// argv, Env and Stdin reach the job; and cancelling a job's context kills
// it within a second, as local mode does.
func TestDriverLikeOSExec(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2", "--lease", "5s") // heartbeats every 0.5 s carry kills
	d := h.startDriver(driver.Config{})
	local, err := driver.New(driver.Config{Dir: h.dir, Local: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := local.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer local.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	blob := make([]byte, 2500000)
	rand.Read(blob)
	if err := os.WriteFile(filepath.Join(h.dir, "blob"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	var every bytes.Buffer
	for i := 0; i < 256; i++ {
		fmt.Fprintf(&every, `\%03o`, i)
	}
	lines := []string{
		"printf '" + every.String() + "'; printf 'err\\0' >&2",
		"cat blob; cat blob >&2",
		"true",
		"echo partial; exit 4",
	}
	for _, line := range lines {
		cmd := exec.Command("/bin/sh", "-c", line)
		cmd.Dir = h.dir
		var wantOut, wantErr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &wantOut, &wantErr
		cmd.Run()
		for _, dr := range []*driver.Driver{d, local} {
			k, err := dr.Exec(ctx, line)
			if err != nil {
				t.Fatal(err)
			}
			res, _ := dr.WaitForOne(ctx, k)
			out, err1 := res.Stdout(ctx)
			errb, err2 := res.Stderr(ctx)
			if err1 != nil || err2 != nil || !bytes.Equal(out, wantOut.Bytes()) || !bytes.Equal(errb, wantErr.Bytes()) {
				t.Errorf("local=%v %q: stdout %d bytes (%v), stderr %d (%v); os/exec: %d and %d", dr.Local(), clip(line),
					len(out), err1, len(errb), err2, wantOut.Len(), wantErr.Len())
			}
			if !dr.Local() && (res.ID == 0 || res.Attempt != 1 || res.Site != "local" || res.Host == "" || res.Started.IsZero() || res.Finished.Before(res.Started)) {
				t.Errorf("result details: %+v", res)
			}
		}
	}

	// Env and Stdin reach the job, through the CLS as here.
	c := d.CommandContext(ctx, "sh", "-c", `printf '%s|' "$A" "$B"; cat`)
	c.Env = []string{"A=it's", "B=$(not run)"}
	c.Stdin = strings.NewReader("in\x00put\n")
	out, err := c.Output()
	if err != nil || string(out) != "it's|$(not run)|in\x00put\n" {
		t.Errorf("Env and Stdin through the CLS: %q, %v", out, err)
	}
	out, err = d.CommandContext(ctx, "sh", "-c", "echo a; echo b >&2").CombinedOutput()
	if err != nil || string(out) != "a\nb\n" {
		t.Errorf("CombinedOutput: %q, %v", out, err)
	}

	// Cancellation kills the job, long before its sleep 60 ends, in both
	// modes.
	for _, dr := range []*driver.Driver{d, local} {
		jctx, jcancel := context.WithCancel(ctx)
		pidFile := filepath.Join(h.dir, fmt.Sprintf("pid-%v", dr.Local()))
		k, err := dr.Exec(jctx, "echo $$ > "+pidFile+".tmp; mv "+pidFile+".tmp "+pidFile+"; exec sleep 60")
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		waitFor(t, 30*time.Second, func() error {
			b, err := os.ReadFile(pidFile)
			if err != nil {
				return err
			}
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			if pid <= 0 || syscall.Kill(pid, 0) != nil {
				return fmt.Errorf("job process %q not running", b)
			}
			return nil
		})
		jcancel()
		start := time.Now()
		for syscall.Kill(pid, 0) == nil {
			if time.Since(start) > 30*time.Second { // half its sleep 60
				t.Fatalf("local=%v: job process %d alive %v after its context was cancelled", dr.Local(), pid, time.Since(start).Round(time.Millisecond))
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("local=%v: job killed %v after its context was cancelled", dr.Local(), time.Since(start))
		res, err := dr.WaitForOne(ctx, k)
		var je *driver.JobError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &je) || je.State != "X" {
			t.Errorf("local=%v: cancelled job: %+v, %v", dr.Local(), res, err)
		}
		if !dr.Local() {
			if js := h.jobs("-s", "X"); len(js) != 1 || js[0].ID != res.ID {
				t.Errorf("the CLS does not show the job deleted: %+v", js)
			}
		}
	}
}
