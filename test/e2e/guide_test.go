//go:build e2e

package e2e

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGuideSubmitting runs the marked blocks of docs/guide/submitting.md
// as written, samples.tsv naming two samples and trace.json a recorded
// run of two tasks, and checks what the page says of them: the ids
// printed, every command's exit status (0, but 2 for the refused stdin
// and flags, whose transcripts runDocBlocks checks), a --time shown by
// mqstat -j, the exported variable seen only when asked for, -o and -e
// files where the page puts them (stderr in -o's file without -e), the
// job file's two jobs run in order, a cleanup job that runs after a
// failure, a -p dependent blocked by it, a held job and a job waiting for
// it, held jobs changed by mqalter, still held, the replayed tasks run
// with their file at its scaled size, and a job asking for a resource no
// one holds waiting, with a warning.
func TestGuideSubmitting(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	if err := os.WriteFile(filepath.Join(h.dir, "samples.tsv"), []byte("s1\tA\ns2\tB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A recorded run of two tasks, b reading the file a writes.
	trace := `{"name":"w","schemaVersion":"1.5","workflow":{"specification":{"tasks":[
{"id":"a","name":"a","children":["b"],"inputFiles":["in.txt"],"outputFiles":["x.txt"]},
{"id":"b","name":"b","parents":["a"],"inputFiles":["x.txt"]}],
"files":[{"id":"in.txt","sizeInBytes":10000},{"id":"x.txt","sizeInBytes":20000}]},
"execution":{"tasks":[{"id":"a","runtimeInSeconds":100},{"id":"b","runtimeInSeconds":50}]}}}`
	if err := os.WriteFile(filepath.Join(h.dir, "trace.json"), []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := runGuideBlocks(t, h, "submitting.md")
	want := map[string]struct {
		rc  int
		out string // a regexp of what it prints (stdout, then stderr)
	}{
		`mqsub --time 30:00 sim './sim --steps 1e6'`:                {0, `^1\n$`},
		`mqsub envt 'echo $MYVAR'`:                                  {0, `^2\n$`},
		`mqsub -V envt 'echo $MYVAR'`:                               {0, `^3\n$`},
		`mqsub --export=MYVAR,OMP_NUM_THREADS=4 envt 'echo $MYVAR'`: {0, `^4\n$`},
		`echo data | mqsub t cat`:                                   {2, `^mqsub: stdin has data; [^\n]*\n$`},
		`cut -f1 samples.tsv | while read s; do mqsub "align-$s" "bwa mem ref.fa $s.fq" </dev/null; done`: {0, `^5\n6\n$`},
		`mqsub -o 'logs/%x-%j.out' -e 'logs/%x-%j.err' align 'bwa mem ref.fa r.fq'`:                       {0, `^7\n$`},
		`mqsub --array 1-100 -o 'run-%A_%a.log' sim './sim {}'`:                                           {0, `^8\n(.*\n)*107\n$`},
		`mqsub -f jobs.jsonl`:                                           {0, `^108\n109\n$`},
		`mqsub work 'exit 1'`:                                           {0, `^110\n$`},
		`mqsub --after-any work tidy 'rm -rf scratch'`:                  {0, `^111\n$`},
		`mqsub -p work report 'make report'`:                            {0, `^112\n$`},
		`mqsub --after-any a,b --after-any c t CMD`:                     {0, `^113\nmqsub: warning: job 113 waits for targets a, b, c, which have no jobs yet`},
		`mqsub -H A 'make data'`:                                        {0, `^114\n$`},
		`mqsub -p A B 'make report'`:                                    {0, `^115\n$`},
		`mqstat -s H`:                                                   {0, `\n114 `},
		`mqsub --priority 100 T CMD`:                                    {0, `^116\n$`},
		`mqsub -H --array 1-100 --mem 4G align 'bwa mem ref.fa r{}.fq'`: {0, `^117\n(.*\n)*216\n$`},
		`mqsub --wfformat trace.json --time-scale 0.01 --size-scale 0.0001 --target-prefix wf-`: {0, `^217\n218\n$`},
		`mqstat -j 118`: {0, `(?s)\nstate:\s+H .*\npriority:\s+50\n.*\nestimate:\s+7200s\n(.*\n)?time limit:\s+14400s\n(.*\n)?resources:\s+mem=8 GiB\n`},
		`mqsub -c 4 --mem 8G blast 'blastp -num_threads 4 -query q.fa -db nr'`:             {0, `^219\n`}, // waits where no placeholder has 4 cores
		`mqsub --gpus 1 --mem 30G infer 'python infer.py'`:                                 {0, `^220\n`},
		`mqsub --resource matlab=1 --resource scratch_gb=100 sim './run.sh'`:               {0, `^221\nmqsub: warning: job 221 waits: needs matlab=1;`},
		`mqsub -c auto --mem auto --array 1-100 align 'bwa mem -t $MQ_CPUS ref.fa r{}.fq'`: {0, `^222\n(.*\n)*321\n$`},
		`mqsub --mem 8X t true`:     {2, `^mqsub: [^\n]*\n$`}, // one line, exit 2; the transcript's text checked as shown
		`mqsub -c 1.5 t true`:       {2, `^mqsub: [^\n]*\n$`},
		`mqsub --gres=gpu:2 t true`: {2, `^mqsub: [^\n]*\n$`},
		"cat > align.sh <<'EOF'\n#!/bin/sh\n#MQ --time 4:00:00 -c 2 --mem 1G\n#MQ -q long -o align.out\necho aligned\nEOF": {0, `^$`},
		`mqsub align sh align.sh`:       {0, `^322\n`}, // a warning follows where no placeholder has 2 cores
		`mqsub -c 4 align2 sh align.sh`: {0, `^323\n`},
	}
	for _, s := range steps {
		w, ok := want[s.cmd]
		if s.rc != w.rc || (ok && !regexp.MustCompile(w.out).MatchString(s.out)) {
			t.Errorf("%s: exit %d, printed:\n%s\nwant exit %d and %s", s.cmd, s.rc, clip(s.out), w.rc, w.out)
		}
		delete(want, s.cmd)
	}
	for cmd := range want {
		t.Errorf("the page no longer runs %s", cmd)
	}
	for _, w := range []struct {
		id    int64
		state string
		out   string // its stdout, for a job that ends done
	}{
		{1, "F", ""},             // no ./sim here
		{2, "D", "\n"},           // prints an empty line: MYVAR not exported
		{3, "D", "x\n"},          // -V
		{4, "D", "x\n"},          // --export=MYVAR,...
		{7, "F", ""},             // no bwa here: its stderr in logs/
		{107, "F", ""},           // the last of the array, its stderr in run-8_100.log
		{108, "D", ""},           // t0 writes hi.txt
		{109, "D", "3 hi.txt\n"}, // t1 after it
		{110, "F", ""},           // work fails
		{111, "D", ""},           // tidy runs once work has ended, however
		{112, "B", ""},           // report is blocked: work failed
		{113, "W", ""},           // a, b and c have no jobs yet
		{114, "H", ""},           // held until mqrls
		{115, "W", ""},           // B waits for A, held
		{117, "H", ""},           // mqalter keeps a held job held
		{218, "D", ""},           // wf-b, after wf-a wrote its input
		{221, "Q", ""},           // queued, waiting for a placeholder that holds matlab
	} {
		h.waitState(w.id, w.state, 2*time.Minute)
		if w.state == "D" {
			if out := h.ok("mqstat", "--cat", strconv.Itoa(int(w.id))); out != w.out {
				t.Errorf("job %d printed %q, want %q", w.id, out, w.out)
			}
		}
	}
	if out := h.ok("mqstat", "-j", "221"); !regexp.MustCompile(`\ncannot run:\s+needs matlab=1;`).MatchString(out) {
		t.Errorf("mqstat -j 221 does not say why it waits:\n%s", out)
	}
	if out := h.ok("mqstat", "-j", "1"); !regexp.MustCompile(`\ntime limit:\s+1800s\n`).MatchString(out) {
		t.Errorf("mqstat -j 1 shows no time limit of 30:00:\n%s", out)
	}
	// The script's #MQ lines, and the command line's -c over its -c.
	for id, cpus := range map[string]string{"322": "2", "323": "4"} {
		out := h.ok("mqstat", "-j", id)
		for _, re := range []string{`\nqueue:\s+long\n`, `\ntime limit:\s+14400s\n`, `\nresources:\s+cpus=` + cpus + ` mem=1 GiB\n`} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("mqstat -j %s lacks %s:\n%s", id, re, out)
			}
		}
	}
	for _, f := range []struct{ name, want string }{
		{"logs/align-7.out", ""},
		{"logs/align-7.err", "bwa: not found"},
		{"run-8_1.log", "./sim: not found"}, // stderr in -o's file
		{"run-8_100.log", "./sim: not found"},
	} {
		if b, err := os.ReadFile(filepath.Join(h.dir, f.name)); err != nil || !strings.Contains(string(b), f.want) || (f.want == "" && len(b) > 0) {
			t.Errorf("%s: %q (%v), want %q in it", f.name, b, err, f.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(h.dir, "x.txt")); err != nil || len(b) != 2 {
		t.Errorf("wf-a's output x.txt: %d bytes (%v), want 2 (20000 x 0.0001)", len(b), err)
	}
	if t.Failed() {
		logSteps(t, steps)
	}
}

// TestGuideData runs the marked block of docs/guide/data.md (a bag of
// tasks in a Storage Affinity queue) as written: every command exits 0,
// and the job whose command fails, copied by the idle placeholder, fails
// after a few attempts (it ran hundreds when each failed copy was
// followed by a new one), as does the job that opted out of copies,
// once.
func TestGuideData(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	steps := runGuideBlocks(t, h, "data.md")
	for _, s := range steps {
		if s.rc != 0 {
			t.Errorf("%s: exit %d:\n%s", s.cmd, s.rc, s.out)
		}
	}
	if d := h.waitState(1, "F", 2*time.Minute); d.Attempts > 3 {
		t.Errorf("job 1, whose command fails, ran %d attempts", d.Attempts)
	}
	if d := h.waitState(2, "F", 2*time.Minute); d.Attempts != 1 {
		t.Errorf("job 2, never copied, ran %d attempts", d.Attempts)
	}
	if t.Failed() {
		for _, s := range steps {
			t.Logf("$ %s (exit %d)\n%s", s.cmd, s.rc, s.out)
		}
	}
}

// TestGuideArrays runs the marked block of docs/guide/arrays.md as
// written: the ids each array prints, the array lines of mqstat, the
// members of one array, and every selector's exit status 0 (the sweep's
// -b and mqwait report the jobs' failures: no blastpgp or run here), and
// the mended job running its new command.
func TestGuideArrays(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	steps := runGuideBlocks(t, h, "arrays.md")
	ids := map[string][2]string{ // first and last id printed
		`mqsub --array 1-1000 blast "blastpgp -i seq{}.fa -o hom{}.txt"`: {"1", "1000"},
		`mqsub --array 0-99:10 -b sweep 'run --param $MQ_ARRAY_INDEX'`:   {"1001", "1010"},
		`mqsub -q gram_neg --array 1-1000%10 sim 'simulate {}'`:          {"1011", "2010"},
	}
	mayFail := map[string]bool{ // exit 1: the jobs they wait for failed
		`mqsub --array 0-99:10 -b sweep 'run --param $MQ_ARRAY_INDEX'`: true,
		`mqwait 1-1000 --timeout 2h`:                                   true,
	}
	for _, s := range steps {
		if s.rc != 0 && !(mayFail[s.cmd] && s.rc == 1) {
			t.Errorf("%s: exit %d:\n%s", s.cmd, s.rc, s.out)
		}
		if w, ok := ids[s.cmd]; ok {
			lines := strings.Split(strings.TrimSpace(s.out), "\n")
			if lines[0] != w[0] || !slices.Contains(lines, w[1]) {
				t.Errorf("%s printed %q..., want the ids %s to %s", s.cmd, clip(s.out), w[0], w[1])
			}
		}
		switch s.cmd {
		case "mqstat":
			if !regexp.MustCompile(`\n1-1000\s+default\s+blast\s+A `).MatchString(s.out) {
				t.Errorf("mqstat shows no line for the array 1-1000:\n%s", s.out)
			}
		case "mqstat --array 120":
			if !strings.Contains(s.out, "\n120 ") || !strings.Contains(s.out, "\n1000 ") {
				t.Errorf("mqstat --array 120 does not list the members 1-1000:\n%s", clip(s.out))
			}
		}
	}
	if d := h.job(123); !strings.HasPrefix(d.Command, "blastp -query p3.fa") {
		t.Errorf("job 123 after --rerun --command runs %q", d.Command)
	}
	// {} in TARGET and -p: a target per member, and each member of the
	// next array waiting on its own.
	for _, s := range steps {
		first, _, _ := strings.Cut(strings.TrimSpace(s.out), "\n")
		id, err := strconv.ParseInt(first, 10, 64)
		switch {
		case !strings.HasPrefix(s.cmd, "mqsub --array 1-3 "):
		case err != nil:
			t.Errorf("%s printed %q, want ids", s.cmd, clip(s.out))
		case strings.Contains(s.cmd, "-p"):
			if d := h.job(id + 1); d.Target != "call" || !slices.Equal(d.Prereqs, []string{"align2"}) {
				t.Errorf("job %d of %s: target %s, prerequisites %v; want call, [align2]", id+1, s.cmd, d.Target, d.Prereqs)
			}
		default:
			if d := h.job(id + 2); d.Target != "align3" || d.Command != "bwa mem ref.fa r3.fq > r3.sam" {
				t.Errorf("job %d of %s: target %s, command %q; want align3", id+2, s.cmd, d.Target, d.Command)
			}
		}
	}
	if t.Failed() {
		for _, s := range steps {
			t.Logf("$ %s (exit %d)\n%s", s.cmd, s.rc, clip(s.out))
		}
	}
}

// TestGuideWatching runs the marked blocks of docs/guide/watching.md as
// written, the job file jobs.jsonl holding two jobs, the second failing,
// and checks what the page says of each command: the ids, the array as
// one line, mqwait's counts and exit status, --watch's views again and
// again until Ctrl-C (exit 0), a purge of nothing, mqsub -b -f naming the
// failed job (exit 1), the warning of a prerequisite target with no jobs
// (its wait ended by Ctrl-C: exit 130, the job stays), the export of a
// target's outputs, and a job stopped at its queue's output cap.
func TestGuideWatching(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2")
	jobs := `{"target":"ok","command":"true"}` + "\n" + `{"target":"bad","command":"exit 2"}` + "\n"
	if err := os.WriteFile(filepath.Join(h.dir, "jobs.jsonl"), []byte(jobs), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := runDocBlocks(t, h, "docs/guide/watching.md", map[string]*regexp.Regexp{
		`mqstat --watch`:                          regexp.MustCompile(`(?s)every 2s\S*: mqstat --watch .*\n1-100 .*every 2s\S*: mqstat --watch .*\n1-100 `),
		`mqstat --watch 5 --summary -q gram_neg`:  regexp.MustCompile(`every 5s: mqstat --watch 5 --summary -q gram_neg .*\n.*QUEUE.*\n\s+gram_neg\s+0\s+0\s+0\s+100\s`),
		`mqsub -b --timeout 10m -p later t "cmd"`: regexp.MustCompile(`job 103 waits for target later, which has no jobs yet \(`),
	})
	mqwaitDone := regexp.MustCompile(`(^|\n)100/100 ended: 100 done\b[^\n]*\n$`)
	want := []wantStep{
		{`mqsub -q gram_neg --array 1-100 protein1BLAST 'echo hit > p{}.hom'`, 0, regexp.MustCompile(`^1\n2\n(.*\n)*100\n$`)},
		{`mqstat`, 0, regexp.MustCompile(`\n1-100\s+gram_neg\s+protein1BLAST\s+A\s.*array 1-100, 100 jobs`)},
		{`mqstat -a`, 0, regexp.MustCompile(`^ID .*\n1-100\s+gram_neg\s+protein1BLAST\s+A\s.*array 1-100, 100 jobs: .*\n$`)},
		{`mqwait -t protein1BLAST`, 0, mqwaitDone},
		{`mqwait -q gram_neg`, 0, mqwaitDone},
		{`mqwait --target-prefix protein`, 0, mqwaitDone},
		{`mqwait --timeout 2h 1-100`, 0, mqwaitDone},
		{`mqstat 1 2 99-100`, 0, regexp.MustCompile(`^ID .*\n1\s+gram_neg\s+protein1BLAST\s+D\s.*\n2\s+gram_neg\s.*\n99\s+gram_neg\s.*\n100\s+gram_neg\s+protein1BLAST\s+D\s.*\n$`)},
		{`mqstat --format id,state,exit,where -s D --limit 2`, 0, regexp.MustCompile(`^ID\tSTATE\tEXIT\tWHERE\n1\tD\t0\t[^\t\n/]+\n2\tD\t0\t[^\t\n/]+\n$`)},
		{`mqstat --watch`, 0, nil},                         // interrupted, as Ctrl-C does
		{`mqstat --watch 5 --summary -q gram_neg`, 0, nil}, // interrupted
		{`cls purge --ended-before 7d`, 0, regexp.MustCompile(`^purged 0 jobs\b`)},
		{`mqsub -b -f jobs.jsonl`, 1, regexp.MustCompile(`^101\n102\n(?s:.*)mqsub:   job 102 failed \(exit 2\)`)},
		{`mqsub -b --timeout 10m -p later t "cmd"`, 130, regexp.MustCompile(`^103\n(?s:.*)mqsub: warning: job 103 waits for target later, which has no jobs yet \((?s:.*)mqsub: interrupted; job 103 stays`)},
		{`mqsub -b --array 1-5 arr 'echo task {}'`, 0, regexp.MustCompile(`^104\n105\n106\n107\n108\n$`)},
		{`mqstat -t arr --cat all -O arr.txt`, 0, regexp.MustCompile(`^$`)},
		{`mqstat --cat 104-108`, 0, regexp.MustCompile(`^==> job 104 attempt 1 target arr state D stdout <==\ntask 1\n==> job 105 attempt 1 target arr state D stdout <==\ntask 2\n(.*\n){6}$`)},
		{`cls queue set capped --max-output 1M`, 0, regexp.MustCompile(`capped: a job's stdout and stderr are capped at 1 MiB together`)},
		{`mqsub -b -q capped big yes`, 143, regexp.MustCompile(`^109\n(?s:.*)mqsub: job 109 failed: output: `)},
		{`mqstat -j 109`, 0, regexp.MustCompile(`\nreason:\s+output: stdout and stderr passed the cap of 1048576 bytes per job \(queue capped's --max-output\); the job was stopped\n`)},
	}
	checkSteps(t, "the page", steps, want)
	if b, err := os.ReadFile(filepath.Join(h.dir, "arr.txt")); err != nil || string(b) != steps[16].out {
		t.Errorf("arr.txt is %q (%v), want what mqstat --cat 104-108 printed", b, err)
	}
	if d := h.job(103); d.State != "W" {
		t.Errorf("job 103 after its mqsub -b was interrupted is %s, want W", d.State)
	}
	if t.Failed() {
		logSteps(t, steps)
	}
}

// TestGuideDashboard runs the marked block of docs/guide/dashboard.md as
// written (a CLS started in the background on the page's port, 8642) and
// checks what it says: cls dashboard url prints the address with its
// token, which opens the dashboard (a session cookie, then the page), and
// /metrics answers a bearer of the token. It skips, saying so, when
// another program holds the port.
func TestGuideDashboard(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:8642")
	if err != nil {
		t.Skipf("the page's port is taken, so its commands cannot run as written: %v", err)
	}
	l.Close()
	h := newHarness(t)
	steps := runGuideBlocks(t, h, "dashboard.md")
	for _, s := range steps {
		if s.rc != 0 {
			t.Errorf("%s: exit %d:\n%s", s.cmd, s.rc, s.out)
		}
	}
	last := steps[len(steps)-1]
	m := regexp.MustCompile(`^http://127\.0\.0\.1:8642/\?token=([0-9a-f]{64})\n$`).FindStringSubmatch(last.out)
	if last.cmd != "cls dashboard url" || m == nil {
		logSteps(t, steps)
		t.Fatalf("%s printed %q, want the address with its token", last.cmd, last.out)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: time.Minute}
	resp, err := browser.Get(strings.TrimSpace(last.out))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" || !strings.Contains(string(body), "<table") {
		t.Errorf("the printed address: %d at %s (want the page without the token): %.300s", resp.StatusCode, resp.Request.URL, body)
	}
	if metrics := httpGet(t, "http://127.0.0.1:8642/metrics", m[1], http.StatusOK); !strings.Contains(metrics, "mq_jobs") {
		t.Errorf("/metrics: %.300s", metrics)
	}
	if t.Failed() {
		logSteps(t, steps)
	}
}
