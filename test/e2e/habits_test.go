//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// acctDetail is the accounting of `mqstat -j ID --json`.
type acctDetail struct {
	State   string  `json:"state"`
	Host    string  `json:"host"`
	Elapsed float64 `json:"elapsed"`
	CPUUser float64 `json:"cpu_user"`
	CPUSys  float64 `json:"cpu_sys"`
	MaxRSS  int64   `json:"max_rss"`
	History []struct {
		Attempt int     `json:"attempt"`
		Elapsed float64 `json:"elapsed"`
		MaxRSS  int64   `json:"max_rss"`
	} `json:"history"`
	BlockedBy *struct {
		Job   int64  `json:"job"`
		State string `json:"state"`
	} `json:"blocked_by"`
}

func (h *harness) acct(id int64) acctDetail {
	h.t.Helper()
	var d acctDetail
	out := h.ok("mqstat", "-j", strconv.FormatInt(id, 10), "--json")
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		h.t.Fatalf("mqstat -j %d --json: %v", id, err)
	}
	return d
}

// TestAccounting: a job's CPU and memory, as its process used them, reach
// mqstat -j, --json and --acct (with earlier attempts and a summary per
// target); a blocked job names the failed one behind it.
func TestAccounting(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	// CPU in a child of the job's shell, 50 MB in dd's buffer.
	burn := h.submit("--est", "0:30", "burn", `sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'; dd if=/dev/zero of=/dev/null bs=50M count=1 2>/dev/null`)
	fail := h.submit("bad", "exit 3")
	blocked := h.submit("-p", "bad", "after", "true")
	h.waitState(burn, "D", 3*time.Minute)
	h.waitState(fail, "F", time.Minute)
	d := h.acct(burn)
	host, _ := os.Hostname()
	if d.CPUUser+d.CPUSys < 0.05 || d.MaxRSS < 45e6 || d.MaxRSS > 1e9 || d.Elapsed <= 0 || d.Host != host {
		t.Fatalf("accounting of job %d: %+v; want CPU > 0.05 s, max RSS about 50 MB, on %s", burn, d, host)
	}
	if est := h.job(burn).Est; est != 30 {
		t.Errorf("mqsub --est 0:30: estimate %v, want 30", est)
	}
	text := h.ok("mqstat", "-j", strconv.FormatInt(burn, 10))
	if !strings.Contains(text, "usage:") || !strings.Contains(text, "max RSS ") {
		t.Errorf("mqstat -j lacks the usage line:\n%s", text)
	}
	// The rerun keeps the first attempt's figures as attempt 1.
	h.ok("mqsub", "--rerun", strconv.FormatInt(burn, 10))
	h.waitState(burn, "D", 3*time.Minute)
	if d := h.acct(burn); len(d.History) != 1 || d.History[0].MaxRSS < 45e6 || d.MaxRSS < 45e6 {
		t.Fatalf("after a rerun: %+v", d)
	}
	b := h.waitState(blocked, "B", time.Minute)
	_ = b
	if d := h.acct(blocked); d.BlockedBy == nil || d.BlockedBy.Job != fail || d.BlockedBy.State != "F" {
		t.Errorf("job %d blocked by %+v, want job %d (F)", blocked, d.BlockedBy, fail)
	}
	if out := h.ok("mqstat", "-j", strconv.FormatInt(blocked, 10)); !strings.Contains(out, "blocked by:") || !strings.Contains(out, "job "+strconv.FormatInt(fail, 10)+" (F (failed)") {
		t.Errorf("mqstat -j of a blocked job:\n%s", out)
	}
	out := h.ok("mqstat", "--acct")
	lines := strings.Split(out, "\n")
	want := map[string]bool{"JOBID": false, strconv.FormatInt(burn, 10): false, strconv.FormatInt(burn, 10) + ".1": false, "TARGET": false}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if _, ok := want[f[0]]; ok {
			want[f[0]] = true
		}
		// TARGET JOBS ENDED CPU MEAN-ELAPSED MAX-ELAPSED COST ("-": no price)
		if f[0] == "burn" && (len(f) != 7 || f[1] != "1" || f[2] != "1" || f[6] != "-") {
			t.Errorf("summary line of burn: %q", l)
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("mqstat --acct has no line starting %q:\n%s", k, out)
		}
	}
	var js []acctDetail
	if err := json.Unmarshal([]byte(h.ok("mqstat", "--acct", "--json", "-t", "burn")), &js); err != nil || len(js) != 1 || js[0].MaxRSS < 45e6 {
		t.Errorf("mqstat --acct --json: %+v, %v", js, err)
	}
}

// TestVersion: every binary says which build it is, and `go install
// ./cmd/...` (the README's install) gives exactly the commands, working.
func TestVersion(t *testing.T) {
	h := newHarness(t)
	names := []string{"cls", "mqagent", "mqalter", "mqdel", "mqhold", "mqrls", "mqsim", "mqstat", "mqsub", "mqwait"}
	for _, name := range names {
		r := h.run(name, "--version")
		if r.code != 0 || !strings.HasPrefix(r.stdout, name+" version ") || !strings.Contains(r.stdout, "go1.") {
			t.Errorf("%s --version: %s", name, r)
		}
	}
	// The README names the Go version go.mod requires.
	gomod := readFile(t, filepath.Join("..", "..", "go.mod"))
	_, goLine, _ := strings.Cut(gomod, "\ngo ")
	goVersion, _, _ := strings.Cut(goLine, "\n")
	if readme := readFile(t, filepath.Join("..", "..", "README.md")); goVersion == "" || !strings.Contains(readme, "With Go "+goVersion+" (what go.mod requires)") {
		t.Errorf("README.md does not name go.mod's Go version %q", goVersion)
	}
	gobin := t.TempDir()
	install := exec.Command("go", "install", "./cmd/...")
	install.Dir, install.Env = filepath.Join("..", ".."), append(os.Environ(), "GOBIN="+gobin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/...: %v\n%s", err, out)
	}
	ents, err := os.ReadDir(gobin)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Fatalf("go install ./cmd/... made %v, want %v", got, names)
	}
	for _, name := range names {
		out, err := exec.Command(filepath.Join(gobin, name), "--version").Output()
		if err != nil || !strings.HasPrefix(string(out), name+" version ") {
			t.Errorf("installed %s --version: %v, %q", name, err, out)
		}
	}
}

// TestHabits: help texts, exit codes, walltime forms, -d, a removed
// working directory, and messages, as a new user meets them.
func TestHabits(t *testing.T) {
	h := newHarness(t)
	cls := h.startCLS("--local", "1")
	// The CLS answers before its greeting reaches its stderr, at times.
	waitFor(t, time.Minute, func() error {
		if !strings.Contains(cls.stderr.String(), "with 1 local placeholder (") {
			return fmt.Errorf("cls serve says: %q", cls.stderr.String())
		}
		return nil
	})
	helps := [][]string{{"mqsub"}, {"mqstat"}, {"mqdel"}, {"mqsim"}, {"cls"}, {"cls", "serve"}, {"cls", "queue"}, {"cls", "queue", "set"},
		{"cls", "key", "add"}, {"cls", "site", "add"}, {"cls", "files"}, {"cls", "files", "get"}}
	for _, c := range helps {
		out := h.ok(c[0], append(c[1:], "--help")...)
		for _, bad := range []string{"(default: false)", "help, h ", "`"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s --help shows %q:\n%s", strings.Join(c, " "), bad, out)
			}
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "(default: number of CPUs)"},
		{[]string{"queue", "set"}, "(default: 3 for a new queue)"},
		{[]string{"key", "add"}, "--name NAME"},
	} {
		if out := h.ok("cls", append(c.args, "--help")...); !strings.Contains(out, c.want) {
			t.Errorf("cls %s --help lacks %q:\n%s", strings.Join(c.args, " "), c.want, out)
		}
	}
	for _, c := range []struct {
		code int
		name string
		args []string
		want string
	}{
		{2, "cls", []string{"queue", "set", "q", "--policy", "lifo"}, "unknown policy"},
		{2, "cls", []string{"queue", "set", "q", "--ceiling", "2x"}, "not a duration"},
		{2, "cls", []string{"queue", "set", "q", "--max-attempts", "0"}, "1..1000"},
		{2, "cls", []string{"site", "add", "local", "--type", "local"}, "reserved"},
		{1, "cls", []string{"site", "remove", "local"}, "own placeholders"},
		{2, "cls", []string{"serve", "--sync", "sometimes"}, "--sync"},
		{2, "mqsub", []string{"-d", "/nonexistent", "t", "true"}, "no such file"},
		{2, "mqsub", []string{"--no-such", "t", "true"}, "unknown flag"},
		{2, "mqsub", []string{"--est", "1:99", "t", "true"}, "below 60"},
		{2, "mqstat", []string{"-s", "Z"}, "-s"},
		{2, "mqstat", []string{"--json=maybe"}, "invalid boolean"},
		{1, "mqstat", []string{"-j", "999"}, "does not exist"},
		{1, "mqdel", []string{"999"}, "999"},
		{2, "mqsim", []string{"--placeholders", "x"}, "placeholders"},
		{2, "mqagent", []string{"--slots", "x"}, "slots"},
	} {
		r := h.run(c.name, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s %s: %s; want exit %d mentioning %q", c.name, strings.Join(c.args, " "), r, c.code, c.want)
		}
		oneLineErr(t, c.name, r)
	}
	// Slurm/PBS time forms.
	h.ok("cls", "queue", "set", "long", "--ceiling", "1-12:00:00")
	if out := h.ok("cls", "queue", "list"); !strings.Contains(out, "36h0m0s") {
		t.Errorf("cls queue list after --ceiling 1-12:00:00:\n%s", out)
	}
	// A removed working directory.
	gone := filepath.Join(h.dir, "gone")
	os.Mkdir(gone, 0o755)
	cmd := exec.Command("sh", "-c", `cd "$1" && rmdir "$1" && exec "$2" t true`, "sh", gone, filepath.Join(binDir, "mqsub"))
	cmd.Env = h.env()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-d DIR") {
		t.Errorf("mqsub in a removed directory: %v, %q; want advice to use -d", err, out)
	}
	// mqstat's old -o still prints output; mqstat --cat is the name.
	id := h.submit("t", "echo hello")
	h.waitState(id, "D", time.Minute)
	for _, flag := range []string{"--cat", "-o", "--output"} {
		if out := h.ok("mqstat", flag, strconv.FormatInt(id, 10)); out != "hello\n" {
			t.Errorf("mqstat %s: %q", flag, out)
		}
	}
}

// TestCancelNotError: Ctrl-C on mqsub -b and a CLS stopping under a
// waiting mqsub -b are ordinary: the commands say the job is kept, and the
// CLS logs nothing at ERROR.
func TestCancelNotError(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	waiter := func(target string) (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command(filepath.Join(binDir, "mqsub"), "-b", target, "sleep 60")
		// It waits a second for the CLS to come back, not the default two
		// minutes (TestWaitAcrossRestart has one that comes back).
		cmd.Env, cmd.Dir = append(h.env(), "MQ_RECONNECT=1s"), h.dir
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, func() error {
			if len(h.jobs("-t", target, "-s", "E")) == 0 {
				return os.ErrNotExist
			}
			return nil
		})
		return cmd, &out
	}
	cmd, out := waiter("a")
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(out.String(), "interrupted; job 1 stays") {
		t.Errorf("mqsub -b after SIGINT: %v, %q; want exit 130 saying the job stays", err, out.String())
	}
	// It stays executing: free the one placeholder for the next job (else
	// that one waits out this one's 60 s).
	h.ok("mqdel", "1")
	cmd, out = waiter("b")
	h.stopCLS(syscall.SIGTERM, time.Minute)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(out.String(), "the job is kept") {
		t.Errorf("mqsub -b while the CLS stops: %v, %q", err, out.String())
	}
	if log := readFile(t, filepath.Join(h.home, "cls.log")); strings.Contains(log, "level=ERROR") {
		t.Errorf("cls.log has errors:\n%s", log)
	}
}

// TestShellDocs: man pages and completion come from the commands' flags,
// and bash completion asks the real command.
func TestShellDocs(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	h.ok("cls", "docs", dir)
	for _, name := range []string{"mqsub", "mqstat", "mqdel", "mqwait", "cls", "mqsim"} {
		man := readFile(t, filepath.Join(dir, "man1", name+".1"))
		if !strings.Contains(man, ".TH "+name+" 1") {
			t.Errorf("man page of %s: %q", name, clip(man))
		}
		for _, f := range []string{filepath.Join("bash", name), filepath.Join("zsh", "_"+name), filepath.Join("fish", name+".fish")} {
			if s := readFile(t, filepath.Join(dir, f)); !strings.Contains(s, name) {
				t.Errorf("%s: %q", f, clip(s))
			}
		}
	}
	if s := readFile(t, filepath.Join(dir, "fish", "mqstat.fish")); !strings.Contains(s, "-s q -l queue") || !strings.Contains(s, "-l acct") {
		t.Errorf("fish completion of mqstat:\n%s", clip(s))
	}
	if s := readFile(t, filepath.Join(dir, "fish", "mqsub.fish")); strings.Contains(s, "`") || !strings.Contains(s, "-s f -l file -r -d") {
		t.Errorf("fish completion of mqsub: a help placeholder's backticks, or -f does not complete files:\n%s", clip(s))
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, c := range []struct{ prog, words, want string }{
		{"mqstat", "mqstat --ac", "--acct"},
		{"cls", "cls qu", "queue"},
		{"cls", "cls queue set --max-a", "--max-attempts"}, // --max-copies too begins --max
	} {
		words := strings.Fields(c.words)
		script := `source "$1"; COMP_WORDS=(` + c.words + `); COMP_CWORD=` + strconv.Itoa(len(words)-1) + `; _mq_complete_` + c.prog + `; echo "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", "-c", script, "bash", filepath.Join(dir, "bash", c.prog))
		cmd.Env = append(h.env(), "PATH="+binDir+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != c.want {
			t.Errorf("completing %q: %v, %q; want %q", c.words, err, out, c.want)
		}
	}
}
