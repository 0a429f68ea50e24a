//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestColonFileNames: files whose names hold colons are declared with
// mqsub --in/--out as they are named, and the job runs on them: a name
// whose end is no size (sample:1.fastq, chr1:100-200.bed), a file of the
// job's directory whose end reads as a size (img:10K), and a name given
// a size of its own (run:12:30:4K). A mistyped size after an existing
// file is refused in one line, nothing queued.
func TestColonFileNames(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	for name, data := range map[string]string{"sample:1.fastq": "ACGT\n", "img:10K": "img"} {
		if err := os.WriteFile(filepath.Join(h.dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := h.run("mqsub", "--in", "sample:1.fastq:10X", "bad", "true")
	oneLineErr(t, "mqsub", r)
	if len(h.jobs()) != 0 {
		t.Fatal("a refused mqsub queued a job")
	}
	id := h.submit("--in", "sample:1.fastq", "--in", "img:10K", "--out", "chr1:100-200.bed", "--out", "run:12:30:4K",
		"t", "cat sample:1.fastq img:10K > chr1:100-200.bed && echo x > run:12:30")
	h.waitState(id, "D", 2*time.Minute)
	var d protocol.JobDetail
	if err := json.Unmarshal([]byte(h.ok("mqstat", "-j", strconv.FormatInt(id, 10), "--json")), &d); err != nil {
		t.Fatal(err)
	}
	files := map[string]int64{}
	for _, f := range append(d.Inputs, d.Outputs...) {
		n := int64(-1)
		if f.Size != nil {
			n = *f.Size
		}
		files[filepath.Base(f.Path)] = n
	}
	want := map[string]int64{"sample:1.fastq": 5, "img:10K": 3, "chr1:100-200.bed": 8, "run:12:30": 4 << 10} // run:12:30 as declared
	for name, n := range want {
		if got, ok := files[name]; !ok || got != n {
			t.Errorf("%s: declared %v (size %d); want size %d", name, ok, got, n)
		}
	}
	if len(files) != len(want) {
		t.Errorf("files %v; want %v", files, want)
	}
}
