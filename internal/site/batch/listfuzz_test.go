package batch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func addSeeds(f *testing.F, pattern string) {
	files, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(files) == 0 {
		f.Fatal("no testdata ", pattern, err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// Whatever squeue prints, Slurm.ParseList does not panic and yields only
// jobs of the name (squeue itself keeps only the user's), with valid ids
// and bounded fields.
func FuzzSlurmParseList(f *testing.F) {
	addSeeds(f, "slurm_*")
	f.Add([]byte("7|RUNNING|a|b|None|mq-rec|x\n8|PENDING|a|b|mq-rec\n--x|RUNNING|a|b|None|mq-rec\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		const name = "mq-rec"
		ps, err := Slurm{}.ParseList(out, name)
		if err != nil {
			return
		}
		checkPlaceholders(t, ps, func(id string) error {
			if !slurmValidID(id) {
				return errInvalidID
			}
			return nil
		})
		for _, p := range ps {
			found := false
			for _, l := range strings.Split(string(out), "\n") {
				l = strings.TrimSpace(l)
				found = found || strings.HasPrefix(l, p.ID+"|") && strings.HasSuffix(l, "|"+name)
			}
			if !found {
				t.Fatalf("listed %q, on no line of name %q", p.ID, name)
			}
		}
	})
}

// Whatever qstat -xml prints, SGE.ParseList does not panic and yields only
// valid, bounded job numbers (qstat itself keeps only the user's).
func FuzzSGEParseList(f *testing.F) {
	addSeeds(f, "sge_*")
	f.Fuzz(func(t *testing.T, out []byte) {
		ps, err := SGE{}.ParseList(out, "mq-rec")
		if err != nil {
			return
		}
		for _, p := range ps {
			if !isDigits(p.ID) || len(p.ID) > sgeMaxID || p.State < Queued || p.State > Suspended || len(p.Why) > 203 {
				t.Fatalf("placeholder %+v", p)
			}
		}
	})
}
