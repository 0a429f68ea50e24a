//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// siteInfo is one site of `cls site list --json`.
func (h *harness) siteInfo(name string) (protocol.SiteInfo, error) {
	h.t.Helper()
	var sl protocol.SiteList
	if err := json.Unmarshal([]byte(h.ok("cls", "site", "list", "--json")), &sl); err != nil {
		return protocol.SiteInfo{}, err
	}
	for _, s := range sl.Sites {
		if s.Name == name {
			return s, nil
		}
	}
	return protocol.SiteInfo{}, fmt.Errorf("no site %s", name)
}

// TestPlaceholderSize: what a site says each placeholder holds reaches
// its agent, which offers it to the CLS (cls site list --json's offered);
// the CLS's own placeholders offer their slots and a share of the
// machine's memory, and no GPUs. The GPUs are declared (this machine has
// none): a local placeholder told it has 4 offers ids 0-3.
func TestPlaceholderSize(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "1", "--slots", "2")
	waitFor(t, time.Minute, func() error {
		s, err := h.siteInfo("local")
		if err == nil && (!strings.HasPrefix(s.Offered, "cpus=2 mem=") || strings.Contains(s.Offered, "gpus")) {
			err = fmt.Errorf("the CLS's own placeholder offers %q; want cpus=2, some memory, no GPUs", s.Offered)
		}
		return err
	})
	h.stopCLS(syscall.SIGTERM, time.Minute)

	h.startCLS("--local", "0")
	h.ok("cls", "site", "add", "g", "--type", "local", "--max", "1", "--cpus", "2", "--mem", "1G", "--gpus", "4",
		"--resource", "lic=2", "--idle", "30s")
	if list := h.ok("cls", "site", "list"); !strings.Contains(list, "(each 2 cpus, 1 GiB, 4 GPUs, lic=2)") {
		t.Errorf("cls site list:\n%s", list)
	}
	id := h.submit("nap", "sleep 2")
	waitFor(t, time.Minute, func() error {
		s, err := h.siteInfo("g")
		if err == nil && s.Offered != "cpus=2 mem=1 GiB gpus=0,1,2,3 lic=2" {
			err = fmt.Errorf("site g's placeholder offers %q; want cpus=2 mem=1 GiB gpus=0,1,2,3 lic=2", s.Offered)
		}
		return err
	})
	h.ok("mqwait", fmt.Sprint(id))

	// Sizes are changed in place, and bad ones refused in one line.
	h.ok("cls", "site", "set", "g", "--mem", "2G", "--resource", "none")
	if list := h.ok("cls", "site", "list"); !strings.Contains(list, "(each 2 cpus, 2 GiB, 4 GPUs)") {
		t.Errorf("after cls site set, cls site list:\n%s", list)
	}
	for _, bad := range [][]string{{"--cpus", "0"}, {"--mem", "8X"}, {"--resource", "a-b=1"}, {"--max", "2"}} {
		r := h.run("cls", append([]string{"site", "set", "g"}, bad...)...)
		if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("cls site set g %s: %s; want refused in one line", strings.Join(bad, " "), r)
		}
	}
}

// TestFakeGPUs: a local placeholder told it has GPUs 0-3 (this machine
// has none) runs four jobs asking --gpus 1 at once, each seeing one GPU in
// CUDA_VISIBLE_DEVICES, no two the same; a fifth waits for one of them.
func TestFakeGPUs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	h.ok("cls", "site", "add", "g", "--type", "local", "--max", "1", "--cpus", "8", "--gpus", "4", "--idle", "30s")
	dir := t.TempDir()
	cmd := fmt.Sprintf(`echo "$CUDA_VISIBLE_DEVICES" > %s/$MQ_JOB_ID.gpu; date +%%s%%N > %s/$MQ_JOB_ID.start; sleep 3; date +%%s%%N > %s/$MQ_JOB_ID.end`, dir, dir, dir)
	var ids []int64
	for range 5 {
		ids = append(ids, h.submit("--gpus", "1", "gpu", cmd))
	}
	for _, id := range ids {
		if d := h.waitState(id, "DF", 2*time.Minute); d.State != "D" {
			t.Fatalf("job %d ended %s: %s", id, d.State, d.Reason)
		}
	}
	read := func(id int64, ext string) string {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.%s", id, ext)))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	stamp := func(id int64, ext string) int64 {
		n, err := strconv.ParseInt(read(id, ext), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// At any moment, the jobs running hold different GPUs.
	for i, a := range ids {
		ga := read(a, "gpu")
		if !slices.Contains([]string{"0", "1", "2", "3"}, ga) {
			t.Errorf("job %d saw CUDA_VISIBLE_DEVICES=%q, want one GPU of 0-3", a, ga)
		}
		for _, b := range ids[i+1:] {
			overlap := stamp(a, "start") < stamp(b, "end") && stamp(b, "start") < stamp(a, "end")
			if overlap && ga == read(b, "gpu") {
				t.Errorf("jobs %d and %d ran at once on GPU %s", a, b, ga)
			}
		}
	}
	concurrent := 0
	for _, a := range ids[:4] {
		if stamp(a, "start") < stamp(ids[0], "end") {
			concurrent++
		}
	}
	if concurrent < 2 {
		t.Errorf("only %d jobs ran beside the first: the placeholder's 4 GPUs were not shared out", concurrent)
	}
}

// TestMemoryKill: a job allocating past its --mem is killed with the
// reason (after its one retry at twice the memory), while its neighbour
// on the same placeholder finishes.
func TestMemoryKill(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	h.ok("cls", "site", "add", "m", "--type", "local", "--max", "1", "--cpus", "2", "--mem", "2G", "--idle", "30s")
	// The shell keeps what it substitutes: 400 MiB, held while it sleeps.
	hog := h.submit("--mem", "100M", "hog", `x=$(head -c 400M /dev/zero | tr '\0' a); sleep 20`)
	calm := h.submit("--mem", "100M", "calm", "sleep 4")
	d := h.waitState(hog, "DF", 3*time.Minute)
	if d.State != "F" || !strings.HasPrefix(d.Reason, protocol.ReasonMemory) || !strings.Contains(d.Reason, "over its request") {
		t.Errorf("the hog ended %s with %q; want failed over its memory", d.State, d.Reason)
	}
	if len(d.History) != 1 || !strings.HasPrefix(d.History[0].Reason, protocol.ReasonMemory) {
		t.Errorf("the hog's history %+v; want its first attempt killed over memory, retried", d.History)
	}
	if c := h.waitState(calm, "DF", 3*time.Minute); c.State != "D" {
		t.Errorf("its neighbour ended %s: %s", c.State, c.Reason)
	}
}

// TestGPUsAfterCLSKill: a local site of one placeholder with GPUs 0-1
// runs two GPU jobs when the CLS is killed. Its agent, orphaned, finishes
// them; the successor counts it among the site's placeholders until it
// exits, so no second placeholder hands the same GPUs to new jobs
// meanwhile (--max 1 holds across the restart).
func TestGPUsAfterCLSKill(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startCLS("--local", "0")
	h.ok("cls", "site", "add", "g", "--type", "local", "--max", "1", "--cpus", "2", "--gpus", "2", "--idle", "5m")
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	cmd := fmt.Sprintf(`date +%%s%%N > %s/$MQ_JOB_ID.start; echo "$CUDA_VISIBLE_DEVICES" > %s/$MQ_JOB_ID.gpu; while [ ! -e %s ]; do sleep 0.1; done; date +%%s%%N > %s/$MQ_JOB_ID.end`, dir, dir, gate, dir)
	old := []int64{h.submit("--gpus", "1", "gpu", cmd), h.submit("--gpus", "1", "gpu", cmd)}
	for _, id := range old {
		waitFile(t, filepath.Join(dir, fmt.Sprintf("%d.gpu", id)), 2*time.Minute)
	}

	h.stopCLS(syscall.SIGKILL, time.Minute)
	h.startCLS("--local", "0")
	fresh := []int64{h.submit("--gpus", "1", "gpu", cmd), h.submit("--gpus", "1", "gpu", cmd)}
	// The site's one placeholder is the orphan, not a new child of the CLS.
	waitFor(t, time.Minute, func() error {
		s, err := h.siteInfo("g")
		if err == nil && s.Running != 1 {
			err = fmt.Errorf("site g runs %d placeholders, want 1", s.Running)
		}
		return err
	})
	if a := h.agents(); len(a) != 0 {
		t.Errorf("the restarted CLS started placeholders %v beside the orphaned one of site g (--max 1)", a)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ids := append(old, fresh...)
	for _, id := range ids {
		if d := h.waitState(id, "DF", 2*time.Minute); d.State != "D" {
			t.Fatalf("job %d ended %s: %s", id, d.State, d.Reason)
		}
	}
	read := func(id int64, ext string) string {
		return strings.TrimSpace(readFile(t, filepath.Join(dir, fmt.Sprintf("%d.%s", id, ext))))
	}
	stamp := func(id int64, ext string) int64 {
		n, err := strconv.ParseInt(read(id, ext), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			overlap := stamp(a, "start") < stamp(b, "end") && stamp(b, "start") < stamp(a, "end")
			if overlap && read(a, "gpu") == read(b, "gpu") {
				t.Errorf("jobs %d and %d ran at once on GPU %s", a, b, read(a, "gpu"))
			}
		}
	}
}
