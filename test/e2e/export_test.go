//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCatExport: mqstat --cat of a selection (a range, several ids, all
// narrowed by -t or -s) prints each job's output after a separator line
// naming the job, its attempt, target and state, in id order, to stdout
// or to -O FILE; an output that does not end a line is ended before the
// next separator. Streamed outputs (an array larger than a page of the
// listing) and per-job files alike.
func TestCatExport(t *testing.T) {
	for _, tc := range []struct {
		mode string
		n    int
	}{{"streams", 1005}, {"files", 25}} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.startCLS("--local", "2", "--output", tc.mode)
			// Odd indexes end their line, even ones do not.
			r := h.run("mqsub", "-b", "--array", "1-"+strconv.Itoa(tc.n), "arr",
				`if [ $((MQ_ARRAY_INDEX % 2)) = 1 ]; then echo "odd $MQ_ARRAY_INDEX"; else printf "even %s" $MQ_ARRAY_INDEX; fi`)
			ids := strings.Fields(r.stdout)
			if r.code != 0 || len(ids) != tc.n {
				t.Fatalf("mqsub --array: %s", r)
			}
			bad := h.run("mqsub", "-b", "bad", "echo out; echo why >&2; exit 3")
			if bad.code == 0 {
				t.Fatalf("mqsub -b of a failing job: %s", bad)
			}
			badID := strings.TrimSpace(bad.stdout)
			first, _ := strconv.ParseInt(ids[0], 10, 64)
			section := func(id int64) string {
				i := id - first + 1
				out := fmt.Sprintf("even %d\n", i)
				if i%2 == 1 {
					out = fmt.Sprintf("odd %d\n", i)
				}
				return fmt.Sprintf("==> job %d attempt 1 target arr state D stdout <==\n%s", id, out)
			}
			var array strings.Builder
			for i := range int64(tc.n) {
				array.WriteString(section(first + i))
			}
			last := ids[len(ids)-1]

			if got := h.ok("mqstat", "--cat", ids[0]+"-"+badID); got != array.String()+"==> job "+badID+" attempt 1 target bad state F stdout <==\nout\n" {
				t.Errorf("--cat FIRST-LAST: %q", clip(got))
			}
			file := filepath.Join(h.dir, "arr.txt")
			if got := h.ok("mqstat", "-t", "arr", "--cat", "all", "-O", file); got != "" {
				t.Errorf("-O FILE: printed %q on stdout", clip(got))
			}
			if got := readFile(t, file); got != array.String() {
				t.Errorf("-t arr --cat all -O: %q", clip(got))
			}
			if got := h.ok("mqstat", "--cat", ids[1]+","+ids[0], last); got != section(first+1)+section(first)+section(first+int64(tc.n)-1) {
				t.Errorf("--cat ID,ID ID: %q", clip(got))
			}
			if got := h.ok("mqstat", "-s", "F", "--cat", "all", "--stderr"); got != "==> job "+badID+" attempt 1 target bad state F stderr <==\nwhy\n" {
				t.Errorf("-s F --cat all --stderr: %q", clip(got))
			}
			// A lone id is printed as before, without a separator.
			if got := h.ok("mqstat", "--cat", ids[1]); got != "even 2" {
				t.Errorf("--cat ID: %q", got)
			}
			for _, args := range [][]string{{"--cat", "0-3"}, {"--cat", "all", ids[0]}, {"--cat", ids[0] + "-" + ids[1], "--follow"}, {"-O", file}} {
				oneLineErr(t, "mqstat", h.run("mqstat", args...))
			}
			if left, _ := filepath.Glob(filepath.Join(h.dir, ".arr.txt.*")); len(left) > 0 {
				t.Errorf("temporary files left beside -O's: %v", left)
			}
		})
	}
}
