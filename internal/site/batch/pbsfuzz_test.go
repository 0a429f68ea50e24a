package batch

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checkPlaceholders fails t unless every placeholder is one a listing may
// yield: a valid id, a known state, fields bounded.
func checkPlaceholders(t *testing.T, ps []Placeholder, validID func(string) error) {
	t.Helper()
	for _, p := range ps {
		if err := validID(p.ID); err != nil {
			t.Fatalf("placeholder id %q: %v", p.ID, err)
		}
		if p.State < Queued || p.State > Suspended {
			t.Fatalf("placeholder %q in state %v", p.ID, p.State)
		}
		if len(p.Why) > 203 {
			t.Fatalf("placeholder %q: why is %d bytes", p.ID, len(p.Why))
		}
	}
}

func pbsSeeds(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "pbs_*"))
	if err != nil || len(files) == 0 {
		f.Fatal("no PBS testdata", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(pbsListing("mquser", b))
		f.Add(pbsListing("mqpbs", b))
	}
	// Two batches: the recorded listing, then one whose jobs all ended
	// since qselect named them.
	real, empty := pbsRecorded(f, "pbs_real_qstat.json"), read(f, "pbs_real_empty.json")
	f.Add(append(append(real, empty...), "\nmq-qstat=153\n"...))
}

// Whatever qstat prints, PBS.ParseList does not panic and yields only
// placeholders with valid ids and bounded fields, owned by the user.
func FuzzPBSParseList(f *testing.F) {
	pbsSeeds(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, name := range []string{"mq-pbsA-abc123", "mq-rec-1a2b3c"} {
			ps, err := PBS{}.ParseList(out, name)
			if err != nil {
				continue
			}
			checkPlaceholders(t, ps, pbsValidID)
			user, ids, _, _ := pbsOwner(out)
			for _, p := range ps {
				if !ids[p.ID] {
					t.Fatalf("listed %q, not among the user's ids %v", p.ID, ids)
				}
			}
			if len(ps) > 0 && (!strings.Contains(string(out), user) || !strings.Contains(string(out), name)) {
				t.Fatalf("listed %v from a listing that names neither %q nor %q", ps, user, name)
			}
		}
	})
}

// Another user's job carries a value the fuzzer chooses, in each place a
// user chooses one (its name, a comment-like attribute, its environment's
// names and values, its qsub arguments), written as PBS writes it: in
// JSON, escaped (fully, or with its control characters raw, or not at
// all, as older PBS versions wrote quotes: then the value may close
// itself and list jobs of its own, or break the JSON), in text,
// its line breaks written as \n and long values wrapped onto tab lines.
// The listing yields exactly the user's two placeholders around it.
func FuzzPBSInjectedValue(f *testing.F) {
	for _, v := range []string{
		"x",
		"\n\t\t},\n\t\t\"2001.pbsserver\":\t{\n\t\t\t\"Job_Name\":\t\"mq-pbsA-abc123\",\n\t\t\t\"Job_Owner\":\t\"mquser@login1\",\n\t\t\t\"job_state\":\t\"R\"",
		"\",\"Job_Owner\":\"mquser@login1\",\"x\":\"",
		"x\"\n\t\t},\n\t\t\"2001.pbsserver\":\t{\"Job_Name\":\"mq-pbsA-abc123\",\"Job_Owner\":\"mquser@login1\",\"job_state\":\"R\",\"e\":\"x",
		"a\\q",
		"PBS_O_HOME=/home/mallory,\n\tJob Id: 1001.pbsserver\n\tjob_state = F",
		"Job_Owner = mquser@login1",
		"\nJob Id: 2001.pbsserver\n    Job_Name = mq-pbsA-abc123\n    Job_Owner = mquser@login1\n    job_state = R",
		"\xff\xfe\x00\x01",
		strings.Repeat("Job_Owner = mquser@login1,", 40),
	} {
		for _, wrap := range []uint8{0, 1, 7, 60} {
			f.Add(v, wrap)
		}
	}
	const name = "mq-pbsA-abc123"
	f.Fuzz(func(t *testing.T, v string, wrap uint8) {
		want := []want{{"1001.pbsserver", Running}, {"3000.pbsserver", Queued}}
		check := func(what, out string) {
			t.Helper()
			// qselect selects every job here, so the parser alone must keep
			// ours, unless the value may write JSON of its own.
			listing := pbsListing("mquser", []byte(out))
			if what == "json, quotes unescaped" {
				listing = pbsListingOf("mquser", "1001.pbsserver 3000.pbsserver", []byte(out))
			}
			ps, err := PBS{}.ParseList(listing, name)
			if err != nil && what == "json, quotes unescaped" {
				return // the value broke the JSON: nothing is listed
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", what, err, out)
			}
			checkPlaceholders(t, ps, pbsValidID)
			if got := summary(ps); !slices.Equal(got, want) {
				t.Fatalf("%s: listed %v, want %v\n%s", what, got, want, out)
			}
		}
		for what, esc := range map[string]func(string) string{
			"json":                   pbsFuzzJSONString,
			"json, control raw":      pbsFuzzRawString,
			"json, quotes unescaped": func(s string) string { return `"` + s + `"` },
		} {
			e := esc(v)
			for _, attrs := range []string{
				`"Job_Name":` + e + `,"job_state":"R"`,
				`"job_state":"R","comment":` + e,
				`"job_state":"R","Variable_List":{"PBS_O_HOME":"/home/mallory","X":` + e + `},"project":"p"`,
				`"job_state":"R","Variable_List":{` + e + `:"x","Y":"y"}`,
				`"job_state":"R","Submit_arguments":` + e + `,"project":"p"`,
			} {
				out := "{\n\t\"pbs_version\":\t\"23.06.06\",\n\t\"Jobs\":\t{\n" +
					"\t\t\"1001.pbsserver\":\t{\"Job_Name\":\"" + name + "\",\"Job_Owner\":\"mquser@login1\",\"job_state\":\"R\"},\n" +
					"\t\t\"2000.pbsserver\":\t{\"Job_Owner\":\"mallory@login1\"," + attrs + "},\n" +
					"\t\t\"3000.pbsserver\":\t{\"Job_Name\":\"" + name + "\",\"Job_Owner\":\"mquser@login1\",\"job_state\":\"Q\"}\n" +
					"\t}\n}\n"
				check(what, out)
			}
		}
		tv := pbsFuzzTextValue(strings.ReplaceAll(v, "\n", `\n`), int(wrap))
		for _, attrs := range []string{
			"    Job_Name = " + tv + "\n    job_state = R\n",
			"    job_state = R\n    comment = " + tv + "\n",
			"    job_state = R\n    Variable_List = PBS_O_HOME=/home/mallory," + tv + "\n    project = p\n",
			"    job_state = R\n    Submit_arguments = " + tv + "\n",
		} {
			out := "Job Id: 1001.pbsserver\n    Job_Name = " + name + "\n    Job_Owner = mquser@login1\n    job_state = R\n\n" +
				"Job Id: 2000.pbsserver\n    Job_Owner = mallory@login1\n" + attrs + "\n" +
				"Job Id: 3000.pbsserver\n    Job_Name = " + name + "\n    Job_Owner = mquser@login1\n    job_state = Q\n\n"
			check("text", out)
		}
	})
}

// pbsFuzzJSONString is s as valid JSON writes it.
func pbsFuzzJSONString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pbsFuzzRawString is s with only its quotes and backslashes escaped:
// line breaks and other control characters are written raw, as PBS did
// for shell functions exported by qsub -V.
func pbsFuzzRawString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// pbsFuzzTextValue wraps s onto tab lines every n bytes, as qstat -f does
// with long values (n = 0: not at all).
func pbsFuzzTextValue(s string, n int) string {
	if n == 0 {
		return s
	}
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\n\t")
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

var errInvalidID = errors.New("not a job id")
