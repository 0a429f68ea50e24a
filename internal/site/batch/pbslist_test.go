package batch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeQstat stands in for OpenPBS's qstat -f -F json given job ids: it
// notes its arguments in $QSTAT_LOG, one call a line, and lists each id
// as a running job of $QSTAT_NAME, but for those in $QSTAT_ENDED and
// $QSTAT_FINISHED, of which it says what qstat says of a job that ended
// (the latter where the server keeps job history), with qstat's status.
// With $QSTAT_STATUS set it fails with that status instead, from its
// call $QSTAT_FAIL_FROM on (the first by default), saying $QSTAT_ERR,
// after the document qstat prints whatever it found.
const fakeQstat = `printf '%s\n' "$*" >>"$QSTAT_LOG"
[ "$1 $2 $3 $4" = '-f -F json -E' ] && [ $# -gt 4 ] || { echo "qstat: called as qstat $*" >&2; exit 2; }
shift 4
if [ -n "$QSTAT_STATUS" ] && [ "$(wc -l <"$QSTAT_LOG")" -ge "${QSTAT_FAIL_FROM:-1}" ]; then
	[ -z "$QSTAT_ERR" ] || printf '%s\n' "$QSTAT_ERR" >&2
	printf '{\n\t"timestamp":\t1795475764,\n\t"pbs_version":\t"23.06.06",\n\t"pbs_server":\t"pbshost"\n}\n'
	exit "$QSTAT_STATUS"
fi
s=0 sep=
printf '{\n\t"timestamp":\t1795475745,\n\t"pbs_version":\t"23.06.06",\n\t"pbs_server":\t"pbshost",\n\t"Jobs":\t{\n'
for j; do
	case " $QSTAT_ENDED " in *" $j "*) echo "qstat: Unknown Job Id $j" >&2; s=153; continue;; esac
	case " $QSTAT_FINISHED " in *" $j "*) echo "qstat: $j Job has finished, use -x or -H to obtain historical job information" >&2; s=35; continue;; esac
	printf '%s\t\t"%s":\t{\n\t\t\t"Job_Name":\t"%s",\n\t\t\t"Job_Owner":\t"mquser@pbshost",\n\t\t\t"job_state":\t"R"\n\t\t}' "$sep" "$j" "$QSTAT_NAME"
	sep=',
'
done
printf '\n\t}\n}\n'
exit $s
`

// pbsIDs is n job ids from first on, as qselect prints them.
func pbsIDs(first, n int) []string {
	var ids []string
	for i := first; i < first+n; i++ {
		ids = append(ids, fmt.Sprintf("%d.pbshost", i))
	}
	return ids
}

// pbsListCase is a listing of TestPBSListAsksForTheSelectedJobs.
type pbsListCase struct {
	what     string
	selected []string // what qselect prints, a line each
	ended    []string // jobs that ended before qstat ("Unknown Job Id")
	finished []string // jobs that ended before qstat, in the server's history
	status   string   // qstat fails with this status, saying err,
	err      string
	failFrom int        // from this call on (0: the first)
	calls    [][]string // qstat's job ids, a call each
	listed   []string   // the placeholders listed
	fail     string     // the command fails with this first line of stderr
}

// PBS's listing asks qstat only for the jobs qselect selected (the
// user's of the name), in batches, and not at all when there are none:
// qstat given no ids lists every job of the cluster, hundreds of
// megabytes on a large one. A job that ended between qselect and qstat
// is not listed, and does not fail the listing; any other failure of
// qstat does. Run as the site runs it, with stand-ins for id, qselect
// and qstat, by /bin/sh and by bash (the /bin/sh of some login hosts).
func TestPBSListAsksForTheSelectedJobs(t *testing.T) {
	const name = "mq-pbsA-abc123"
	if cmd := (PBS{}).ListCommand(name); strings.Contains(cmd, "\n") {
		t.Errorf("the listing has a newline, which a csh login shell refuses in quotes: %q", cmd)
	}
	shells := []string{"sh"}
	if _, err := exec.LookPath("bash"); err == nil {
		shells = append(shells, "bash")
	}
	cases := []pbsListCase{
		{what: "none selected"},
		{what: "one batch", selected: pbsIDs(1, 3), calls: [][]string{pbsIDs(1, 3)}, listed: pbsIDs(1, 3)},
		{what: "batches", selected: pbsIDs(1000, 250),
			calls:  [][]string{pbsIDs(1000, 100), pbsIDs(1100, 100), pbsIDs(1200, 50)},
			listed: pbsIDs(1000, 250)},
		{what: "ended since qselect", selected: pbsIDs(1, 5), ended: []string{"2.pbshost", "4.pbshost"}, finished: []string{"5.pbshost"},
			calls: [][]string{pbsIDs(1, 5)}, listed: []string{"1.pbshost", "3.pbshost"}},
		{what: "a whole batch ended", selected: pbsIDs(100, 101), ended: []string{"200.pbshost"},
			calls: [][]string{pbsIDs(100, 100), {"200.pbshost"}}, listed: pbsIDs(100, 100)},
		{what: "every one ended", selected: pbsIDs(1, 2), finished: pbsIDs(1, 2), calls: [][]string{pbsIDs(1, 2)}},
		// qselect prints the server's ids; what has no job id's form is
		// never given to qstat, least of all as an option.
		{what: "not ids", selected: []string{"-x", "7.pbshost", "--help", "8.pbs host", "9.pbshost;true", "$(id)", "10[].pbshost", "11[3].pbshost", "12", "*"},
			calls:  [][]string{{"7.pbshost", "10[].pbshost", "11[3].pbshost", "12"}},
			listed: []string{"10[].pbshost", "11[3].pbshost", "12", "7.pbshost"}},
		{what: "server down", selected: pbsIDs(1, 3), status: "255", err: "qstat: cannot connect to server pbshost (errno=15010)",
			calls: [][]string{pbsIDs(1, 3)}, fail: "qstat: cannot connect to server pbshost (errno=15010)"},
		{what: "qstat not found", selected: pbsIDs(1, 3), status: "127", err: "sh: 1: qstat: not found",
			calls: [][]string{pbsIDs(1, 3)}, fail: "sh: 1: qstat: not found"},
		{what: "an ended job and another error", selected: pbsIDs(1, 3), status: "153",
			err:   "qstat: cannot connect to server pbshost (errno=15010)\nqstat: Unknown Job Id 3.pbshost",
			calls: [][]string{pbsIDs(1, 3)}, fail: "qstat: cannot connect to server pbshost (errno=15010)"},
		{what: "failed without a word", selected: pbsIDs(1, 3), status: "1",
			calls: [][]string{pbsIDs(1, 3)}, fail: "qstat: exit status 1"},
		{what: "failed in the second batch", selected: pbsIDs(1, 150), ended: []string{"5.pbshost"}, status: "15", failFrom: 2,
			err: "qstat: Unauthorized Request", calls: [][]string{pbsIDs(1, 100), pbsIDs(101, 50)}, fail: "qstat: Unauthorized Request"},
	}
	for _, shell := range shells {
		for _, tc := range cases {
			t.Run(shell+"/"+tc.what, func(t *testing.T) { runPBSList(t, shell, name, tc) })
		}
	}
}

// runPBSList runs the listing of tc with shell and checks it.
func runPBSList(t *testing.T, shell, name string, tc pbsListCase) {
	dir := t.TempDir()
	log := filepath.Join(dir, "qstat.log")
	selected := filepath.Join(dir, "selected")
	var sel string
	for _, id := range tc.selected {
		sel += id + "\n"
	}
	if err := os.WriteFile(selected, []byte(sel), 0o600); err != nil {
		t.Fatal(err)
	}
	env := fakeCommands(t, map[string]string{
		"qstat":   fakeQstat,
		"id":      "[ \"$*\" = '-un' ] || exit 2\necho mquser\n",
		"qselect": "[ \"$*\" = '-u mquser -N " + name + "' ] || exit 2\ncat \"$QSELECT_OUT\"\n",
	})
	cmd := exec.Command(shell, "-c", PBS{}.ListCommand(name))
	cmd.Env = append(env, "QSTAT_LOG="+log, "QSELECT_OUT="+selected, "QSTAT_NAME="+name,
		"QSTAT_ENDED="+strings.Join(tc.ended, " "), "QSTAT_FINISHED="+strings.Join(tc.finished, " "),
		"QSTAT_STATUS="+tc.status, "QSTAT_ERR="+tc.err, fmt.Sprintf("QSTAT_FAIL_FROM=%d", max(tc.failFrom, 1)))
	out, err := cmd.Output()

	var calls [][]string
	if b, err := os.ReadFile(log); err == nil {
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			calls = append(calls, strings.Fields(strings.TrimPrefix(l, "-f -F json -E ")))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if !slices.EqualFunc(calls, tc.calls, slices.Equal) {
		t.Errorf("qstat called with %v; want %v", calls, tc.calls)
	}

	if tc.fail != "" {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ps, perr := PBS{}.ParseList(out, name)
			t.Fatalf("the listing ran (%v) and reads as %v, %v; want it to fail with %q", err, summary(ps), perr, tc.fail)
		}
		if first, _, _ := strings.Cut(string(ee.Stderr), "\n"); first != tc.fail {
			t.Errorf("failed saying %q; want %q", ee.Stderr, tc.fail)
		}
		return
	}
	if err != nil {
		t.Fatalf("%v: %s", err, err.(*exec.ExitError).Stderr)
	}
	ps, err := PBS{}.ParseList(out, name)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var listed []string
	for _, p := range ps {
		listed = append(listed, p.ID)
	}
	slices.Sort(listed)
	want := slices.Clone(tc.listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("listed %v; want %v", listed, want)
	}
}

// ParseList reads the listing of each batch qstat was given, and qstat's
// status after it: a status not 0 with a listing is that of jobs that
// ended since qselect (the command fails at qstat's other errors), one
// without a listing is a qstat that did not run as asked, and a listing
// without its status was cut short.
func TestPBSParseBatches(t *testing.T) {
	const name = "mq-rec"
	doc := func(jobs ...string) string {
		var b strings.Builder
		b.WriteString("{\n\t\"timestamp\":\t1795475745,\n\t\"pbs_version\":\t\"23.06.06\",\n\t\"pbs_server\":\t\"pbshost\"")
		if len(jobs) > 0 {
			b.WriteString(",\n\t\"Jobs\":\t{\n")
			for i, j := range jobs {
				id, st, _ := strings.Cut(j, " ")
				if i > 0 {
					b.WriteString(",\n")
				}
				fmt.Fprintf(&b, "\t\t%q:\t{\n\t\t\t\"Job_Name\":\t%q,\n\t\t\t\"Job_Owner\":\t\"u@h\",\n\t\t\t\"job_state\":\t%q\n\t\t}", id, name, st)
			}
			b.WriteString("\n\t}")
		}
		b.WriteString("\n}\n")
		return b.String()
	}
	text := func(id, st string) string {
		return "Job Id: " + id + "\n    Job_Name = " + name + "\n    Job_Owner = u@h\n    job_state = " + st + "\n\n"
	}
	const head = "mq-owner=u\nmq-ids=1.s 2.s 3.s\n"
	for _, tc := range []struct {
		what    string
		out     string
		want    []want // sorted by id
		wantErr string // what the error says
	}{
		{"no ids", "mq-owner=u\nmq-ids=\n", nil, ""},
		{"no ids, a banner before", "Welcome\nmq-owner=u\nmq-ids=\n", nil, ""},
		{"ids none of which is a job id", "mq-owner=u\nmq-ids=-x $(id)\n", nil, ""},
		{"one document", head + doc("1.s R", "2.s Q") + "\nmq-qstat=0\n", []want{{"1.s", Running}, {"2.s", Queued}}, ""},
		{"several documents", head + doc("1.s R", "2.s Q") + "\nmq-qstat=0\n" + doc("3.s R") + "\nmq-qstat=0\n",
			[]want{{"1.s", Running}, {"2.s", Queued}, {"3.s", Running}}, ""},
		{"several documents, compact", head + strings.TrimSpace(doc("1.s R")) + "\nmq-qstat=0\n" + strings.TrimSpace(doc("3.s Q")) + "\nmq-qstat=0",
			[]want{{"1.s", Running}, {"3.s", Queued}}, ""},
		{"several texts", head + text("1.s", "R") + "\nmq-qstat=0\n" + text("2.s", "H") + "\nmq-qstat=0\n",
			[]want{{"1.s", Running}, {"2.s", Queued}}, ""},
		{"a document and a text", head + doc("1.s R") + "\nmq-qstat=0\n" + text("2.s", "R") + "\nmq-qstat=0\n",
			[]want{{"1.s", Running}, {"2.s", Running}}, ""},
		{"Unknown Job Id: the others listed", head + doc("1.s R", "3.s Q") + "\nmq-qstat=153\n", []want{{"1.s", Running}, {"3.s", Queued}}, ""},
		{"Job has finished: the others listed", head + doc("2.s R") + "\nmq-qstat=35\n", []want{{"2.s", Running}}, ""},
		{"a whole batch ended", head + doc("1.s R") + "\nmq-qstat=0\n" + doc() + "\nmq-qstat=153\n", []want{{"1.s", Running}}, ""},
		{"text: the others listed", head + text("1.s", "R") + "\nmq-qstat=153\n", []want{{"1.s", Running}}, ""},
		{"qstat printed nothing, status 0", head + "\nmq-qstat=0\n", nil, ""},

		{"ids, qstat not run", head, nil, "missing"},
		{"ids, qstat not run, a banner after", head + "Welcome\n", nil, "not followed by its exit status"},
		{"failed, nothing printed", head + "mq-qstat=255\n", nil, "status 255 and printed no listing"},
		{"failed in the second batch, nothing printed", head + doc("1.s R") + "\nmq-qstat=0\n" + "\nmq-qstat=1\n", nil, "status 1 and printed no listing"},
		{"text: failed, no job printed", head + "qstat: cannot connect to server pbshost\n\nmq-qstat=153\n", nil, "status 153 and printed no listing"},
		{"cut short: no status", head + doc("1.s R"), nil, "not followed by its exit status"},
		{"cut short: the second batch", head + doc("1.s R") + "\nmq-qstat=0\n" + doc("2.s R"), nil, "batch 2 is not followed"},
		{"cut short in a document", head + doc("1.s R")[:40], nil, "offset"},
		{"two documents in a row", head + doc("1.s R") + doc("2.s R") + "\nmq-qstat=0\n", nil, "not followed by its exit status"},
		{"a status not a number", head + doc("1.s R") + "\nmq-qstat=x\n", nil, "not followed by its exit status"},
		{"a status negative", head + doc("1.s R") + "\nmq-qstat=-1\n", nil, "not followed by its exit status"},
		{"a status empty", head + doc("1.s R") + "\nmq-qstat=\n", nil, "not followed by its exit status"},
		{"a status too large", head + doc("1.s R") + "\nmq-qstat=256\n", nil, "not followed by its exit status"},
		{"a status far too large", head + doc("1.s R") + "\nmq-qstat=1000\n", nil, "not followed by its exit status"},
		{"a job in two documents", head + doc("1.s R") + "\nmq-qstat=0\n" + doc("1.s Q") + "\nmq-qstat=0\n", nil, "listed twice"},
		{"a job in two texts", head + text("1.s", "R") + "\nmq-qstat=0\n" + text("1.s", "Q") + "\nmq-qstat=0\n", nil, "listed twice"},
		{"a job in a document and a text", head + doc("1.s R") + "\nmq-qstat=0\n" + text("1.s", "Q") + "\nmq-qstat=0\n", nil, "listed twice"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			ps, err := PBS{}.ParseList([]byte(tc.out), name)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("listed %v, error %v; want an error saying %q", summary(ps), err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := summary(ps)
			slices.SortFunc(got, func(a, b want) int { return strings.Compare(a.id, b.id) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("listed %v; want %v", got, tc.want)
			}
		})
	}
}

// Only what has a job id's form goes to qstat: the pattern the command
// gives grep -E passes every id ParseList keeps (pbsValidID), so none of
// ours is left out and taken for ended, and nothing that could read as an
// option.
func TestPBSIDPattern(t *testing.T) {
	ids := []string{
		"1", "4711.pbshost", "4711.pbs-host.example.org", "4711[].pbshost", "4711[3].pbshost", "4711.", "4711[]", "12.s_1",
		"", "-x", "--help", "-1", "x1.s", "1x.s", "1.s h", " 1.s", "1.s;true", "1.s$(id)", "1[.s", "1[x].s", "1[3]x.s", "1.s[3]",
		"1.s/x", "1.s\\x", "1.s*", "*", "1.s\t", "1.s@other", "ÿ1.s",
	}
	cmd := exec.Command("grep", "-E", pbsIDPattern)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	passed := map[string]bool{}
	for _, l := range strings.SplitAfter(string(out), "\n") {
		if l != "" {
			passed[strings.TrimSuffix(l, "\n")] = true
		}
	}
	for _, id := range ids {
		valid := pbsValidID(id) == nil
		if passed[id] != valid {
			t.Errorf("%q: grep -E passes it %v, pbsValidID %v", id, passed[id], valid)
		}
		if passed[id] && strings.HasPrefix(id, "-") {
			t.Errorf("%q passed: it reads as an option", id)
		}
	}
}
