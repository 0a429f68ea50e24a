//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startAgent runs `cls agent --site SITE --host HOST` on this harness's
// socket; it is killed in cleanup (it carries MQ_HOME). It logs at info
// level, for waitConnected.
func (h *harness) startAgent(site, host string) *agentProc {
	h.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "cls"), "agent", "--site", site, "--host", host, "--reconnect", "5s", "--log-level", "info")
	cmd.Env = h.env()
	cmd.Dir = h.dir
	a := &agentProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{}), site: site}
	cmd.Stdout, cmd.Stderr = a.stderr, a.stderr
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start agent: %v", err)
	}
	go func() {
		cmd.Wait()
		close(a.done)
	}()
	return a
}

// TestDCAffinity: two placeholders at different sites and a dc queue. A job
// writes a 20 MB file at site A; the jobs reading it all run at A although
// the placeholder at B keeps asking (its polls stay parked), while a job
// with no inputs runs at either. mqstat shows the queue's policy and where
// the file was produced.
func TestDCAffinity(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0", "--site-net", "A=0.1,1M", "--site-net", "default=0.5,1M")
	h.ok("cls", "queue", "set", "dq", "--policy", "dc")
	if list := h.ok("cls", "queue", "list"); !strings.Contains(list, "dc") {
		t.Fatalf("cls queue list does not show the policy:\n%s", list)
	}
	h.startAgent("A", "hostA")
	data := filepath.Join(h.dir, "hom.dat")
	prod := h.submit("-q", "dq", "--out", data+":20M", "produce", "head -c 20000000 /dev/zero > hom.dat")
	h.ok("mqsub", "-q", "dq", "-b", "wait-for-producer", "true") // runs at A after prod: A has asked twice
	if d := h.job(prod); d.State != "D" || d.Site != "A" {
		t.Fatalf("producer: %+v", d.jobInfo)
	}
	h.startAgent("B", "hostB").waitConnected(t, 1, time.Minute) // B registers; its polls then stay parked
	var consumers []int64
	for i := 0; i < 6; i++ {
		consumers = append(consumers, h.submit("-q", "dq", "--in", "hom.dat", "consume", "sleep 0.3; wc -c < hom.dat"))
	}
	free := h.submit("-q", "dq", "free", "sleep 0.3")
	waitFor(t, 60*time.Second, func() error {
		for _, j := range h.jobs("-q", "dq", "-s", "WQE") {
			return fmt.Errorf("job %d is %s", j.ID, j.State)
		}
		return nil
	})
	for _, id := range consumers {
		d := h.job(id)
		if d.State != "D" || d.Site != "A" || d.Host != "hostA" {
			t.Errorf("consumer %d: state %s at site %s host %s (%s); want done at A", id, d.State, d.Site, d.Host, d.Reason)
		}
	}
	if d := h.job(free); d.State != "D" {
		t.Errorf("free job: %+v", d.jobInfo)
	}
	// mqstat -j names the input, its size from stat, and where it was made.
	out := h.ok("mqstat", "-j", strconv.FormatInt(consumers[0], 10), "--json")
	var d struct {
		Inputs []struct {
			Path string `json:"path"`
			Size *int64 `json:"size"`
			Site string `json:"site"`
			Job  int64  `json:"job"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Inputs) != 1 || d.Inputs[0].Path != data || d.Inputs[0].Size == nil || *d.Inputs[0].Size != 20000000 ||
		d.Inputs[0].Site != "A" || d.Inputs[0].Job != prod {
		t.Errorf("consumer inputs %s", out)
	}
	if text := h.ok("mqstat", "-j", strconv.FormatInt(consumers[0], 10)); !strings.Contains(text, "produced by job "+strconv.FormatInt(prod, 10)+" at site A") {
		t.Errorf("mqstat -j does not say where the input was produced:\n%s", text)
	}
	if sum := h.ok("mqstat", "--summary"); !strings.Contains(sum, "dc") {
		t.Errorf("mqstat --summary does not show the policy:\n%s", sum)
	}
}
