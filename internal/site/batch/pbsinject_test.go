package batch

import (
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Another user of the cluster sees our placeholders' name in qstat and
// chooses their own jobs' name, environment (Variable_List) and qsub
// arguments. Whatever they put there, the listing yields only the login
// user's jobs of the name, each as PBS lists it.
func TestPBSInjection(t *testing.T) {
	const name = "mq-pbsA-abc123"
	// The real server's layout (testdata/pbs_real_qstat.json): tabs.
	jsonJob := func(id, owner, state, rest string) string {
		return "\t\t\"" + id + "\":\t{\n" +
			"\t\t\t\"Job_Name\":\t\"" + name + "\",\n" +
			"\t\t\t\"Job_Owner\":\t\"" + owner + "\",\n" +
			"\t\t\t\"job_state\":\t\"" + state + "\",\n" +
			"\t\t\t\"queue\":\t\"workq\"" + rest + "\n" +
			"\t\t}"
	}
	jsonListing := func(jobs ...string) string {
		return "{\n\t\"timestamp\":\t1795475745,\n\t\"pbs_version\":\t\"23.06.06\",\n\t\"Jobs\":\t{\n" +
			strings.Join(jobs, ",\n") + "\n\t}\n}\n"
	}
	ours := jsonJob("1001.pbsserver", "mquser@login1", "R", "")
	// A backslash PBS does not escape: the JSON is not valid.
	const invalid = ",\n\t\t\t\"Variable_List\":\t{\n\t\t\t\t\"PBS_O_PATH\":\t\"/opt/a\\q\"\n\t\t\t}"
	textJob := func(id, owner, state, rest string) string {
		return "Job Id: " + id + "\n" +
			"    Job_Name = " + name + "\n" +
			"    Job_Owner = " + owner + "\n" +
			"    job_state = " + state + "\n" +
			"    queue = workq\n" + rest + "\n"
	}
	oursText := textJob("1001.pbsserver", "mquser@login1", "R", "")
	onlyOurs := []want{{"1001.pbsserver", Running}}

	for _, tc := range []struct {
		what    string
		out     string
		want    []want
		wantErr bool
		ids     string // what qselect selects ("": every job listed)
	}{
		{"json: another's backslash makes the JSON invalid", jsonListing(ours,
			jsonJob("2000.pbsserver", "mallory@login1", "Q", invalid)), onlyOurs, false, ""},
		{"json: attributes in Variable_List, JSON made invalid", jsonListing(ours,
			jsonJob("2000.pbsserver", "mallory@login1", "Q", ",\n\t\t\t\"Variable_List\":\t{\n"+
				"\t\t\t\t\"PBS_O_PATH\":\t\"/opt/a\\q\",\n"+
				"\t\t\t\t\"Job_Owner\":\t\"mquser@login1\",\n"+
				"\t\t\t\t\"job_state\":\t\"R\"\n\t\t\t}")), onlyOurs, false, ""},
		// PBS escaped the quotes of a value, not its line breaks (a shell
		// function exported by qsub -V).
		{"json: a line break in a value starts a job", jsonListing(ours,
			jsonJob("2000.pbsserver", "mallory@login1", "Q", invalid+",\n\t\t\t\"comment\":\t\"x\n"+
				"\t\t},\n\t\t\\\"2001.pbsserver\\\":\t{\n"+
				"\t\t\t\\\"Job_Name\\\":\t\\\""+name+"\\\",\n"+
				"\t\t\t\\\"Job_Owner\\\":\t\\\"mquser@login1\\\",\n"+
				"\t\t\t\\\"job_state\\\":\t\\\"R\\\"\"")), onlyOurs, false, ""},
		// PBS escaped neither (older versions did not escape quotes): the
		// value closes itself and lists our job again, finished. Which
		// one is real cannot be told, so the listing fails.
		{"json: a value that lists our job again", jsonListing(ours,
			jsonJob("2000.pbsserver", "mallory@login1", "Q", invalid+",\n\t\t\t\"comment\":\t\"x\"\n"+
				"\t\t},\n\t\t\"1001.pbsserver\":\t{\n"+
				"\t\t\t\"Job_Name\":\t\""+name+"\",\n"+
				"\t\t\t\"Job_Owner\":\t\"mquser@login1\",\n"+
				"\t\t\t\"job_state\":\t\"F\",\n"+
				"\t\t\t\"etime\":\t\"x\"")), nil, true, ""},
		{"json: an owner named twice, the JSON valid", jsonListing(ours,
			jsonJob("2000.pbsserver", "mallory@login1", "Q", ",\n\t\t\t\"Submit_arguments\":\t\"x\",\"Job_Owner\":\"mquser@login1\"")), onlyOurs, false, ""},
		{"json: an owner named in another case", jsonListing(ours,
			jsonJob("2000.pbsserver", "mallory@login1", "Q", ",\n\t\t\t\"job_owner\":\t\"mquser@login1\",\n\t\t\t\"JOB_OWNER\":\t\"mquser@login1\"")), onlyOurs, false, ""},
		{"json: a state named twice, the JSON invalid", jsonListing(
			jsonJob("1001.pbsserver", "mquser@login1", "R", ""),
			jsonJob("2000.pbsserver", "mallory@login1", "Q", invalid+",\n\t\t\t\"job_state\":\t\"R\"")), onlyOurs, false, ""},
		{"json: our job listed twice", jsonListing(ours, jsonJob("1001.pbsserver", "mquser@login1", "F", "")), nil, true, ""},
		{"json: an id qdel takes for an option", jsonListing(ours, jsonJob("-Wforce", "mquser@login1", "R", "")), nil, true, "1001.pbsserver -Wforce"},
		// PBS escaped no quotes in values (older versions): the value
		// closes itself and lists a job of its own making, as ours. Only
		// the ids the server selected as ours are kept.
		{"json: a value that lists a job of its own", jsonListing(ours,
			jsonJob("2000.pbsserver", "mallory@login1", "Q", ",\n\t\t\t\"comment\":\t\"x\"\n"+
				"\t\t},\n\t\t\"2001.pbsserver\":\t{\n"+
				"\t\t\t\"Job_Name\":\t\""+name+"\",\n"+
				"\t\t\t\"Job_Owner\":\t\"mquser@login1\",\n"+
				"\t\t\t\"job_state\":\t\"R\",\n"+
				"\t\t\t\"etime\":\t\"x\"")), onlyOurs, false, "1001.pbsserver"},
		{"text: an owner on a continuation line", oursText + textJob("2000.pbsserver", "mallory@login1", "R",
			"    Variable_List = PBS_O_HOME=/home/mallory,\n"+
				"\tJob_Owner = mquser@login1,PBS_O_SHELL=/bin/bash"), onlyOurs, false, ""},
		{"text: a job on continuation lines", oursText + textJob("2000.pbsserver", "mallory@login1", "Q",
			"    Variable_List = PBS_O_HOME=/home/mallory,\n"+
				"\tJob Id: 2001.pbsserver\n"+
				"\tJob_Name = "+name+"\n"+
				"\tJob_Owner = mquser@login1\n"+
				"\tjob_state = R"), onlyOurs, false, ""},
		{"text: our job restarted on continuation lines", oursText + textJob("2000.pbsserver", "mallory@login1", "Q",
			"    Variable_List = PBS_O_HOME=/home/mallory,\n"+
				"\tJob Id: 1001.pbsserver\n"+
				"\tjob_state = F"), onlyOurs, false, ""},
		{"text: an owner named twice (a line break in a value)", oursText + textJob("2000.pbsserver", "mallory@login1", "R",
			"    Variable_List = X=a\n"+
				"    Job_Owner = mquser@login1"), onlyOurs, false, ""},
		{"text: a job at a line break in a value", oursText + textJob("2000.pbsserver", "mallory@login1", "R",
			"    Variable_List = X=a\n"+
				"Job Id: 1001.pbsserver\n"+
				"    job_state = F"), nil, true, ""},
	} {
		layouts := map[string]string{"": tc.out}
		if strings.HasPrefix(tc.out, "{") {
			// Older servers write no tab after the colon.
			layouts = map[string]string{"tabs": tc.out, "compact": strings.ReplaceAll(tc.out, "\":\t", "\":")}
		}
		for layout, out := range layouts {
			t.Run(tc.what+"/"+layout, func(t *testing.T) {
				listing := pbsListing("mquser", []byte(out))
				if tc.ids != "" {
					listing = pbsListingOf("mquser", tc.ids, []byte(out))
				}
				ps, err := PBS{}.ParseList(listing, name)
				if tc.wantErr {
					if err == nil {
						t.Errorf("listed %v; want an error", summary(ps))
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := summary(ps); !slices.Equal(got, tc.want) {
					t.Errorf("listed %v; want %v", got, tc.want)
				}
			})
		}
	}
}

// A value wrapped onto many continuation lines is kept bounded as it is
// read: joining each line onto all the lines before copied the value
// over and over (a megabyte of qstat took gigabytes).
func TestPBSLongValueBounded(t *testing.T) {
	out := "mq-owner=u\nmq-ids=1.s\nJob Id: 1.s\n    Job_Name = mq-rec\n    Job_Owner = u@h\n    job_state = Q\n    comment = x\n" +
		strings.Repeat("\t"+strings.Repeat("a", 19)+"\n", 50000) + pbsDone
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ps, err := PBS{}.ParseList([]byte(out), "mq-rec")
	runtime.ReadMemStats(&after)
	if err != nil || len(ps) != 1 || len(ps[0].Why) > 203 {
		t.Fatalf("%d bytes of comment: %v, %v", len(out), ps, err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("reading %d bytes allocated %d", len(out), n)
	}
}
