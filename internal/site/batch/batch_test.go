package batch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/shellwords"
)

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pbsListing is a qstat listing as PBS.ListCommand prints it when the
// login user is user: the owner line first, then the ids line, here
// naming every job in out (so ParseList's other checks decide).
func pbsListing(user string, out []byte) []byte {
	var ids []string
	for _, m := range pbsListedID.FindAllSubmatch(out, -1) {
		ids = append(ids, string(m[1])+string(m[2]))
	}
	return pbsListingOf(user, strings.Join(ids, " "), out)
}

// pbsListingOf is out as PBS.ListCommand prints it when the login user
// is user and qselect selects ids: one batch, qstat's status 0 after it
// (none when it printed nothing: the ids are then none).
func pbsListingOf(user, ids string, out []byte) []byte {
	b := append([]byte("mq-owner="+user+"\nmq-ids="+ids+"\n"), out...)
	if len(bytes.TrimSpace(out)) > 0 {
		b = append(b, pbsDone...)
	}
	return b
}

// pbsDone is the line ListCommand prints after a qstat that exited 0.
const pbsDone = "\nmq-qstat=0\n"

// pbsListedID finds job ids in JSON and text listings.
var pbsListedID = regexp.MustCompile(`"([0-9]+(?:\[[0-9]*\])?\.[^"\s]*)":\s*\{|(?m:^Job Id: (\S+))`)

// pbsRecorded is testdata file name as PBS.ListCommand prints it: the
// real server's jobs were submitted by mqpbs, the others' by mquser.
func pbsRecorded(t testing.TB, name string) []byte {
	user := "mquser"
	if strings.HasPrefix(name, "pbs_real_") {
		user = "mqpbs"
	}
	return pbsListing(user, read(t, name))
}

// fakeCommands writes stand-ins for a batch system's commands, each a
// /bin/sh script of the body given, to a directory of the test's, and
// returns the environment that finds them first on PATH.
func fakeCommands(t *testing.T, scripts map[string]string) []string {
	t.Helper()
	bin := t.TempDir()
	for cmd, body := range scripts {
		if err := os.WriteFile(filepath.Join(bin, cmd), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
}

type want struct {
	id    string
	state State
}

func summary(ps []Placeholder) []want {
	var w []want
	for _, p := range ps {
		w = append(w, want{p.ID, p.State})
	}
	sort.Slice(w, func(i, j int) bool { return w[i].id < w[j].id })
	return w
}

// The testdata files were recorded from Son of Grid Engine 8.1.9, Slurm
// 22.05.8 and OpenPBS 23.06 on Debian 12 (scripts/sge.sh, scripts/slurm.sh,
// scripts/pbs.sh: pbs_real_*); the other PBS ones follow the OpenPBS / PBS
// Professional reference guide's formats (older versions, invalid JSON).
func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		batch System
		file  string
		name  string
		want  []want
	}{
		{SGE{}, "sge_qstat_mixed.xml", "mq-rec", []want{{"1", Running}, {"2", Running}, {"3", Queued}}},
		{SGE{}, "sge_qstat_mixed.xml", "other", nil},
		{SGE{}, "sge_qstat_dr.xml", "mq-rec", []want{{"1", Exited}, {"2", Running}, {"3", Queued}, {"4", Queued}}},
		{SGE{}, "sge_qstat_eqw.xml", "mq-rec", []want{{"4", Error}}},
		{SGE{}, "sge_qstat_empty.xml", "mq-rec", nil},
		// qmod -rj of a running job (as SGE does after its node fails): Rq,
		// waiting to run again.
		{SGE{}, "sge_qstat_rescheduled.xml", "mq-rec", []want{{"599", Queued}}},
		{Slurm{}, "slurm_squeue_mixed.txt", "mq-rec", []want{{"7", Running}, {"8", Running}, {"9", Queued}}},
		{Slurm{}, "slurm_squeue_cancel.txt", "mq-rec", []want{{"7", Exited}, {"8", Running}, {"9", Queued}}}, // 7 COMPLETING after scancel
		{Slurm{}, "slurm_squeue_ours.txt", "mq-slurmA-b8ad02", []want{{"4", Running}, {"5", Running}}},
		{PBS{}, "pbs_qstat_f.json", "mq-pbsA-abc123", []want{{"1001.pbsserver", Running}, {"1002.pbsserver", Queued}, {"1003.pbsserver", Queued}, {"1005[].pbsserver", Running}}},
		{PBS{}, "pbs_qstat_f_badjson.json", "mq-pbsA-abc123", []want{{"1001.pbsserver", Running}, {"1002.pbsserver", Queued}, {"1003.pbsserver", Queued}, {"1005[].pbsserver", Running}}},
		{PBS{}, "pbs_qstat_f.txt", "mq-pbsA-abc123", []want{{"1001.pbsserver", Running}, {"1002.pbsserver", Queued}}},
		// Two running, one queued (the node's 2 cores are taken), one held
		// (qsub -h), and another name's job.
		{PBS{}, "pbs_real_qstat.json", "mq-rec-1a2b3c", []want{{"5.pbshost", Running}, {"6.pbshost", Running}, {"7.pbshost", Queued}, {"8.pbshost", Queued}}},
		{PBS{}, "pbs_real_qstat.json", "other-job", []want{{"9.pbshost", Queued}}},
		{PBS{}, "pbs_real_qstat.txt", "mq-rec-1a2b3c", []want{{"5.pbshost", Running}, {"6.pbshost", Running}, {"7.pbshost", Queued}, {"8.pbshost", Queued}}},
		// No jobs: a document without "Jobs" (and qstat -f prints nothing).
		{PBS{}, "pbs_real_empty.json", "mq-rec-1a2b3c", nil},
		// qstat -x: finished jobs (F; Exit_status 271 after qdel, -29 over
		// walltime) are gone.
		{PBS{}, "pbs_real_history.json", "mq-rec-1a2b3c", nil},
		{PBS{}, "pbs_real_history.json", "mq-test-abc", nil},
	} {
		out := read(t, tc.file)
		if _, ok := tc.batch.(PBS); ok {
			out = pbsRecorded(t, tc.file)
		}
		ps, err := tc.batch.ParseList(out, tc.name)
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if got := summary(ps); !slices.Equal(got, tc.want) {
			t.Errorf("%s (%s): got %v, want %v", tc.file, tc.name, got, tc.want)
		}
	}
}

func TestParseListTimes(t *testing.T) {
	ps, err := SGE{}.ParseList(read(t, "sge_qstat_mixed.xml"), "mq-rec")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.State == Running && p.Started.Format("2006-01-02T15:04:05") != "2026-11-22T05:50:11" {
			t.Errorf("job %s started %v", p.ID, p.Started)
		}
		if p.State == Queued && p.Submitted.IsZero() {
			t.Errorf("job %s: no submission time", p.ID)
		}
	}
	ps, err = PBS{}.ParseList(pbsRecorded(t, "pbs_qstat_f.json"), "mq-pbsA-abc123")
	if err != nil || len(ps) == 0 {
		t.Fatalf("pbs_qstat_f.json: %v, %v", ps, err)
	}
	for _, p := range ps {
		if p.ID == "1001.pbsserver" && p.Started.Format(time.ANSIC) != "Wed Nov  6 13:20:41 2019" {
			t.Errorf("PBS stime read as %v", p.Started)
		}
	}
	for _, f := range []string{"pbs_real_qstat.json", "pbs_real_qstat.txt"} {
		ps, err = PBS{}.ParseList(pbsRecorded(t, f), "mq-rec-1a2b3c")
		if err != nil || len(ps) == 0 {
			t.Fatalf("%s: %v, %v", f, ps, err)
		}
		for _, p := range ps {
			if p.Submitted.Format(time.ANSIC) != "Mon Nov 23 23:15:42 2026" {
				t.Errorf("%s: job %s qtime read as %v", f, p.ID, p.Submitted)
			}
			if (p.State == Running) != !p.Started.IsZero() {
				t.Errorf("%s: job %s %v, stime read as %v", f, p.ID, p.State, p.Started)
			}
		}
	}
}

// PBS's qdel fails for a job that has ended though it cancels the others;
// the cancel command fails only for other errors. Run with a stand-in qdel
// that prints what OpenPBS 23.06 printed (testdata/pbs_real_qdel_*).
func TestPBSCancel(t *testing.T) {
	for _, tc := range []struct {
		out  string // qdel's output: a testdata file or text
		code int
		fail bool
	}{
		{"", 0, false},
		{"pbs_real_qdel_unknown.txt", 153, false},
		{"pbs_real_qdel_finished.txt", 35, false},
		{"qdel: Unknown Job Id 99.pbshost\nqdel: Unauthorized Request  7.pbshost\n", 159, true},
		{"qdel: cannot connect to server pbshost (errno=111)\n", 111, true},
		{"", 1, true},
	} {
		bin := t.TempDir()
		out := tc.out
		if strings.HasSuffix(out, ".txt") {
			out = string(read(t, tc.out))
		}
		fake := fmt.Sprintf("#!/bin/sh\nprintf '%%s' %s >&2\nexit %d\n", shellwords.Quote(out), tc.code)
		if err := os.WriteFile(filepath.Join(bin, "qdel"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", PBS{}.CancelCommand([]string{"7.pbshost", "99.pbshost"}))
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		got, err := cmd.CombinedOutput()
		if (err != nil) != tc.fail {
			t.Errorf("qdel printing %q, exit %d: cancel err %v (output %q), want failure %v", out, tc.code, err, got, tc.fail)
		}
		if tc.fail && strings.Contains(string(got), "Unknown Job Id") {
			t.Errorf("the error names a job that is gone anyway: %q", got)
		}
	}
}

// An unreadable listing is an error, never an empty list: an empty list
// would make the provisioner submit placeholders that already exist.
func TestParseListRefusesGarbage(t *testing.T) {
	for _, tc := range []struct {
		batch System
		out   string
	}{
		{SGE{}, ""},
		{SGE{}, "error: commlib error: got select error (Connection refused)\n"},
		{SGE{}, "<?xml version='1.0'?><detailed_job_info></detailed_job_info>"},
		{SGE{}, "<job_info><queue_info><job_list><JB_job_number>x1</JB_job_number><JB_name>n</JB_name></job_list></queue_info></job_info>"},
		{Slurm{}, "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"},
		{Slurm{}, "1|RUNNING|2026-11-22T05:50:26|2026-11-22T05:50:26\n"},
		{Slurm{}, "1|WEIRD|x|y|n\n"},
		// Ids go to scancel and qdel: one that reads as an option, or a
		// number longer than any, is not a job's.
		{Slurm{}, "--help|RUNNING|2026-11-22T06:00:58|N/A|None|n\n"},
		{SGE{}, "<job_info><queue_info><job_list><JB_job_number>123456789012345678901</JB_job_number><JB_name>n</JB_name></job_list></queue_info></job_info>"},
		{PBS{}, "mq-owner=u\nmq-ids=1.s\n{\"Jobs\":{\"1.s\":{\"Job_Name\":\"n\",\"Job_Owner\":\"u@h\"}}}" + pbsDone},
		{PBS{}, "mq-owner=u\nmq-ids=1.s\n{\"Jobs\":{\"1.s\":{\"Job_Name\":\"n\",\"Job_Owner\":\"u@h\",\"job_state\":\"?\"}}}" + pbsDone},
		{PBS{}, "mq-owner=u\nmq-ids=1.s\nJob Id: 1.s\n    Job_Name = n\n    Job_Owner = u@h\n" + pbsDone},
	} {
		if ps, err := tc.batch.ParseList([]byte(tc.out), "n"); err == nil {
			t.Errorf("%T.ParseList(%q) = %v, want an error", tc.batch, tc.out, ps)
		}
	}
}

func TestParseSubmit(t *testing.T) {
	for _, tc := range []struct {
		batch   System
		out, id string
	}{
		{SGE{}, "4711\n", "4711"},
		{SGE{}, "4711.1-10:1\n", "4711"},
		{SGE{}, "Your job 11 (\"placeholder.sh\") has been submitted\n", ""},
		{SGE{}, "", ""},
		{Slurm{}, "4711\n", "4711"},
		{Slurm{}, "4711;cluster\n", "4711"},
		{Slurm{}, "Submitted batch job 4711\n", ""},
		{PBS{}, "1001.pbsserver\n", "1001.pbsserver"},
		{PBS{}, "1005[].pbsserver\n", "1005[].pbsserver"},
		{PBS{}, "5.pbshost\n", "5.pbshost"}, // OpenPBS 23.06
		{PBS{}, "qsub: Unknown queue\n", ""},
	} {
		id, err := tc.batch.ParseSubmit([]byte(tc.out))
		if id != tc.id || (err == nil) != (tc.id != "") {
			t.Errorf("%T.ParseSubmit(%q) = %q, %v; want %q", tc.batch, tc.out, id, err, tc.id)
		}
	}
}

func TestScripts(t *testing.T) {
	j := Request{Name: "mq-a-123456", Queue: "long", Walltime: 90*time.Minute + time.Second, Slots: 4, LogDir: "/home/u/.mq-sites/x/a/log"}
	for _, tc := range []struct {
		batch System
		want  []string
	}{
		{SGE{}, []string{"#$ -N mq-a-123456", "#$ -l h_rt=1:30:01", "#$ -q long", "#$ -pe smp 4", "#$ -o /home/u/.mq-sites/x/a/log/", "#$ -j y"}},
		{Slurm{}, []string{"#SBATCH --job-name=mq-a-123456", "#SBATCH --time=1:30:01", "#SBATCH --partition=long", "#SBATCH --cpus-per-task=4", "#SBATCH --output=/home/u/.mq-sites/x/a/log/%x-%j.out"}},
		{PBS{}, []string{"#PBS -N mq-a-123456", "#PBS -l walltime=1:30:01", "#PBS -q long", "#PBS -l select=1:ncpus=4", "#PBS -j oe"}},
	} {
		s := Script(tc.batch, j, "/home/u/bin/mq agent", []string{"--site", "a", "--key", "/k'ey"})
		lines := strings.Split(s, "\n")
		if lines[0] != "#!/bin/sh" {
			t.Errorf("%T: first line %q", tc.batch, lines[0])
		}
		for _, w := range tc.want {
			if !slices.Contains(lines, w) {
				t.Errorf("%T script lacks %q:\n%s", tc.batch, w, s)
			}
		}
		// Directives must come before the first command, or batch systems ignore them.
		last := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "exec ") })
		for i, l := range lines {
			if i > last && strings.HasPrefix(l, "#") && len(l) > 2 && l[1] != '!' && l[1] != ' ' {
				t.Errorf("%T: directive after the command: %q", tc.batch, l)
			}
		}
		if !strings.Contains(s, `exec '/home/u/bin/mq agent' agent --site a --key '/k'\''ey' --host "$(hostname)"`) {
			t.Errorf("%T: agent line wrong:\n%s", tc.batch, s)
		}
	}
	// SGE's parallel environment: the site's, else smp; none for one slot.
	for _, tc := range []struct {
		slots int
		pe    string
		want  string // the -pe directive, "" = none
	}{
		{4, "", "#$ -pe smp 4"},
		{4, "mpi-shm", "#$ -pe mpi-shm 4"},
		{2, "openmp*", "#$ -pe openmp* 2"},
		{1, "", ""},
	} {
		j := Request{Name: "mq-a-1", Walltime: time.Hour, Slots: tc.slots, PE: tc.pe, LogDir: "/l"}
		var got []string
		for _, l := range strings.Split(Script(SGE{}, j, "a", nil), "\n") {
			if strings.HasPrefix(l, "#$ -pe") {
				got = append(got, l)
			}
		}
		if want := []string{tc.want}; (tc.want == "" && len(got) != 0) || (tc.want != "" && !slices.Equal(got, want)) {
			t.Errorf("slots %d pe %q: -pe lines %q, want %q", tc.slots, tc.pe, got, tc.want)
		}
	}
	if got := (SGE{}).SubmitCommand("/s p.sh", []string{"-P", "proj x"}); got != `qsub -terse -P 'proj x' '/s p.sh'` {
		t.Errorf("SGE submit: %s", got)
	}
	if got := (Slurm{}).CancelCommand([]string{"1", "2"}); got != "scancel 1 2" {
		t.Errorf("Slurm cancel: %s", got)
	}
}

// TestScriptsResources: a placeholder's memory and GPUs become each
// system's request, and one that asks for neither asks as before.
func TestScriptsResources(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name  string
		batch System
		r     Request
		want  []string // directives, in order, that mention memory or GPUs (or PBS's select)
	}{
		{"slurm", Slurm{}, Request{Slots: 16, Mem: 64 * gib, GPUs: 2}, []string{"#SBATCH --cpus-per-task=16", "#SBATCH --mem=65536M", "#SBATCH --gres=gpu:2"}},
		{"slurm mem rounded up", Slurm{}, Request{Slots: 1, Mem: 1500 * 1000 * 1000}, []string{"#SBATCH --cpus-per-task=1", "#SBATCH --mem=1431M"}},
		{"slurm cores only", Slurm{}, Request{Slots: 4}, []string{"#SBATCH --cpus-per-task=4"}},
		{"pbs", PBS{}, Request{Slots: 8, Mem: 30 * gib, GPUs: 1}, []string{"#PBS -l select=1:ncpus=8:mem=30720mb:ngpus=1"}},
		{"pbs memory only", PBS{}, Request{Slots: 2, Mem: gib / 2}, []string{"#PBS -l select=1:ncpus=2:mem=512mb"}},
		{"pbs cores only", PBS{}, Request{Slots: 4}, []string{"#PBS -l select=1:ncpus=4"}},
		// SGE's memory is per slot: 10 GiB over 4 slots is 2560M each.
		{"sge", SGE{}, Request{Slots: 4, Mem: 10 * gib, GPUs: 2}, []string{"#$ -pe smp 4", "#$ -l h_vmem=2560M,mem_free=2560M", "#$ -l gpu=2"}},
		{"sge per slot rounded up", SGE{}, Request{Slots: 3, Mem: 5 * gib}, []string{"#$ -pe smp 3", "#$ -l h_vmem=1707M,mem_free=1707M"}},
		{"sge one slot", SGE{}, Request{Slots: 1, Mem: 4 * gib}, []string{"#$ -l h_vmem=4096M,mem_free=4096M"}},
		// Under 4 GiB h_vmem could stop the agent itself: mem_free only.
		{"sge small", SGE{}, Request{Slots: 2, Mem: 2 * gib}, []string{"#$ -pe smp 2", "#$ -l mem_free=1024M"}},
		{"sge cores only", SGE{}, Request{Slots: 4}, []string{"#$ -pe smp 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.Name, tc.r.Walltime, tc.r.LogDir = "mq-a-1", time.Hour, "/l"
			var got []string
			for _, l := range strings.Split(Script(tc.batch, tc.r, "a", nil), "\n") {
				if strings.Contains(l, "mem") || strings.Contains(l, "gpu") || strings.Contains(l, "select=") || strings.Contains(l, "cpus-per-task") || strings.Contains(l, "-pe ") {
					got = append(got, l)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("directives %q; want %q", got, tc.want)
			}
		})
	}
}

func FuzzParseList(f *testing.F) {
	for _, name := range []string{"sge_qstat_mixed.xml", "sge_qstat_eqw.xml", "slurm_squeue_mixed.txt", "pbs_qstat_f.json", "pbs_qstat_f_badjson.json", "pbs_qstat_f.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if strings.HasPrefix(name, "pbs_") {
			f.Add(pbsListing("mquser", b))
		}
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, b := range []System{SGE{}, Slurm{}, PBS{}} {
			for _, name := range []string{"mq-rec", "mq-pbsA-abc123"} {
				ps, err := b.ParseList(out, name)
				if err != nil {
					continue
				}
				for _, p := range ps {
					if p.ID == "" || p.State < Queued || p.State > Error {
						t.Fatalf("%T: placeholder %+v from %q", b, p, out)
					}
				}
			}
			b.ParseSubmit(out)
		}
	})
}

// Every job state and flag Slurm documents (its job state codes page) is
// known: an unknown one fails the whole listing, so a placeholder in it
// (POWER_UP_NODE while a power-saving cluster boots its node) kept the site
// degraded for as long.
func TestSlurmStatesKnown(t *testing.T) {
	for state, want := range map[string]State{
		"BOOT_FAIL": Exited, "CANCELLED": Exited, "COMPLETED": Exited, "DEADLINE": Exited, "FAILED": Exited,
		"NODE_FAIL": Exited, "OUT_OF_MEMORY": Exited, "PENDING": Queued, "PREEMPTED": Exited, "RUNNING": Running,
		"SUSPENDED": Suspended, "TIMEOUT": Exited,
		"COMPLETING": Exited, "CONFIGURING": Queued, "EXPEDITING": Queued, "LAUNCH_FAILED": Exited,
		"POWER_UP_NODE": Queued, "RECONFIG_FAIL": Exited, "REQUEUED": Queued, "REQUEUE_FED": Queued,
		"REQUEUE_HOLD": Queued, "RESIZING": Running, "RESV_DEL_HOLD": Queued, "REVOKED": Exited,
		"SIGNALING": Running, "SPECIAL_EXIT": Exited, "STAGE_OUT": Running, "STOPPED": Suspended, "UPDATE_DB": Running,
	} {
		ps, err := Slurm{}.ParseList([]byte("7|"+state+"|2026-11-22T06:00:58|N/A|n\n"), "n")
		if err != nil || len(ps) != 1 || ps[0].State != want {
			t.Errorf("squeue state %s: %v, %v; want %v", state, ps, err, want)
		}
	}
}

// Suspended placeholders are told apart from running ones in every batch
// system: they take no work.
func TestSuspendedStates(t *testing.T) {
	sge := func(state string) string {
		return "<?xml version='1.0'?><job_info><queue_info><job_list state=\"running\"><JB_job_number>5</JB_job_number><JB_name>n</JB_name><state>" +
			state + "</state></job_list></queue_info><job_info></job_info></job_info>"
	}
	for _, tc := range []struct {
		batch System
		out   string
		want  State
	}{
		{SGE{}, sge("r"), Running},
		{SGE{}, sge("Rr"), Running},
		{SGE{}, sge("s"), Suspended},
		{SGE{}, sge("S"), Suspended},
		{SGE{}, sge("T"), Suspended},
		{SGE{}, sge("ds"), Exited},
		{SGE{}, sge("hqw"), Queued},
		{SGE{}, sge("Rq"), Queued}, // rescheduled after a node failure: waiting again
		{SGE{}, sge("hr"), Running},
		{SGE{}, sge("t"), Running},
		{Slurm{}, "5|SUSPENDED|2026-11-22T06:00:58|2026-11-22T06:00:58|n\n", Suspended},
		{PBS{}, "mq-owner=u\nmq-ids=5.s\nJob Id: 5.s\n    Job_Name = n\n    Job_Owner = u@h\n    job_state = S\n" + pbsDone, Suspended},
		{PBS{}, "mq-owner=u\nmq-ids=5.s\nJob Id: 5.s\n    Job_Name = n\n    Job_Owner = u@h\n    job_state = U\n" + pbsDone, Suspended},
		{PBS{}, "mq-owner=u\nmq-ids=5.s\nJob Id: 5.s\n    Job_Name = n\n    Job_Owner = u@h\n    job_state = R\n" + pbsDone, Running},
	} {
		ps, err := tc.batch.ParseList([]byte(tc.out), "n")
		if err != nil || len(ps) != 1 || ps[0].State != tc.want {
			t.Errorf("%T %q: %v, %v; want %v", tc.batch, tc.out, ps, err, tc.want)
		}
	}
}

// Why a queued placeholder waits, as the batch system says (recorded from
// Slurm 22.05.8, sbatch -H then scontrol hold, and Son of Grid Engine
// 8.1.9, qsub -h): held ones say so, running ones and routine waits say
// nothing. PBS gives its scheduler's comment, else "held" for H.
func TestWhyQueued(t *testing.T) {
	type why struct {
		id  string
		st  State
		why string
	}
	for _, tc := range []struct {
		batch System
		out   []byte
		want  []why
	}{
		{Slurm{}, read(t, "slurm_squeue_held.txt"), []why{{"490", Queued, "JobHeldAdmin"}, {"491", Running, ""}}},
		{SGE{}, read(t, "sge_qstat_held.xml"), []why{{"558", Queued, "held"}, {"559", Running, ""}}},
		{Slurm{}, []byte("7|PENDING|2026-11-22T06:00:58|N/A|None|mq-rec\n8|PENDING|2026-11-22T06:00:58|N/A|PartitionTimeLimit|mq-rec\n"), []why{{"7", Queued, ""}, {"8", Queued, "PartitionTimeLimit"}}},
		{PBS{}, []byte("mq-owner=u\nmq-ids=5.s\nJob Id: 5.s\n    Job_Name = mq-rec\n    Job_Owner = u@h\n    job_state = H\n" + pbsDone), []why{{"5.s", Queued, "held"}}},
		{PBS{}, []byte("mq-owner=u\nmq-ids=6.s\nJob Id: 6.s\n    Job_Name = mq-rec\n    Job_Owner = u@h\n    job_state = Q\n    comment = Not Running: Insufficient amount of resource: ncpus \n" + pbsDone), []why{{"6.s", Queued, "Not Running: Insufficient amount of resource: ncpus"}}},
	} {
		ps, err := tc.batch.ParseList(tc.out, "mq-rec")
		if err != nil {
			t.Errorf("%T: %v", tc.batch, err)
			continue
		}
		var got []why
		for _, p := range ps {
			got = append(got, why{p.ID, p.State, p.Why})
		}
		slices.SortFunc(got, func(a, b why) int { return strings.Compare(a.id, b.id) })
		if !slices.Equal(got, tc.want) {
			t.Errorf("%T: %v, want %v", tc.batch, got, tc.want)
		}
	}
}

// Another user of the cluster, who sees the placeholders' name in qstat,
// can submit jobs of that name. They are not placeholders: counted as
// queued ones the CLS would submit no more, and running ones that never
// connect would degrade the site. qstat is asked only for the jobs
// qselect selects, but should it list others' (as it does given no ids),
// they are still not taken. The listing is run as the site runs it, with
// a stand-in qstat and id.
func TestPBSListsOnlyTheUsersJobs(t *testing.T) {
	const name = "mq-pbsA-abc123"
	job := func(owner, state string) string {
		return fmt.Sprintf(`{"Job_Name":%q,"Job_Owner":%q,"job_state":%q,"qtime":"Wed Nov  6 13:20:40 2019"}`, name, owner, state)
	}
	listing := `{"Jobs":{` +
		`"1.pbsserver":` + job("mquser@login1", "R") + `,` +
		`"2.pbsserver":` + job("mallory@login1", "Q") + `,` +
		`"3.pbsserver":` + job("mallory@login2", "R") + `,` +
		`"4.pbsserver":` + job("mquser2@login1", "Q") + `,` +
		`"5.pbsserver":` + job("mquser@login2", "Q") + `,` +
		`"6.pbsserver":` + job("", "Q") + `}}`
	env := fakeCommands(t, map[string]string{
		"qstat": "[ \"$*\" = '-f -F json -E 1.pbsserver 2.pbsserver 3.pbsserver 4.pbsserver 5.pbsserver 6.pbsserver' ] || exit 2\nprintf '%s\\n' " + shellwords.Quote(listing) + "\n",
		"id":    "[ \"$*\" = '-un' ] || exit 2\necho mquser\n",
		// It selects every job here, so the owner check is what keeps
		// mquser's.
		"qselect": "[ \"$*\" = '-u mquser -N " + name + "' ] || exit 2\nfor i in 1 2 3 4 5 6; do echo $i.pbsserver; done\n",
	})
	cmd := exec.Command("sh", "-c", PBS{}.ListCommand(name))
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", PBS{}.ListCommand(name), err)
	}
	ps, err := PBS{}.ParseList(out, name)
	if err != nil {
		t.Fatal(err)
	}
	got := summary(ps)
	slices.SortFunc(got, func(a, b want) int { return strings.Compare(a.id, b.id) })
	if w := []want{{"1.pbsserver", Running}, {"5.pbsserver", Queued}}; !slices.Equal(got, w) {
		t.Errorf("listed %v; want only mquser's jobs %v", got, w)
	}

	// A listing that does not say whose it is cannot be read.
	for _, out := range []string{
		listing,
		"mq-owner=\n" + listing,
		"mq-owner=mquser\n" + listing,
		"Job Id: 1.s\n    Job_Name = " + name + "\n    Job_Owner = mquser@h\n    job_state = R\n",
	} {
		if ps, err := (PBS{}).ParseList([]byte(out), name); err == nil {
			t.Errorf("ParseList(%.40q...) = %v; want an error", out, ps)
		}
	}
	// What a login shell prints before it is skipped.
	if ps, err := (PBS{}).ParseList([]byte("Welcome to the cluster\nmq-owner=mquser\nmq-ids=1.pbsserver 5.pbsserver\n"+listing+pbsDone), name); err != nil || len(ps) != 2 {
		t.Errorf("after a banner: %v, %v; want mquser's 2 jobs", ps, err)
	}
}

// ParseExplain reads the reason SGE gives for a job in Eqw from qstat -j
// (recorded from this host's SGE), without its time, [uid:pid] and
// "error:" prefix; a job without one says nothing.
func TestSGEParseExplain(t *testing.T) {
	real, err := os.ReadFile(filepath.Join("testdata", "sge_qstat_j_eqw.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ out, want string }{
		{string(real), "can't chdir to /nonexistent/mq-eqw: No such file or directory"},
		{"job_number: 7\nscheduling info: none\n", ""},
		{"error reason 1: plain words\n", "plain words"},
		{"error reason          1:      12/03/2026 09:00:37 [1001:501]: first\nerror reason 2: second\n", "first"},
		{"", ""},
	} {
		if got := (SGE{}).ParseExplain([]byte(tc.out)); got != tc.want {
			t.Errorf("ParseExplain(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
	if got := (SGE{}).ExplainCommand("144"); got != "qstat -j 144" {
		t.Errorf("ExplainCommand = %q", got)
	}
}

// Whatever qstat -j prints, ParseExplain does not panic and says one line.
func FuzzSGEParseExplain(f *testing.F) {
	addSeeds(f, "sge_qstat_j_*")
	f.Fuzz(func(t *testing.T, out []byte) {
		if got := (SGE{}).ParseExplain(out); strings.Contains(got, "\n") {
			t.Errorf("ParseExplain gave %q: more than one line", got)
		}
	})
}
