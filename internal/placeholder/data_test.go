package placeholder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

// runner is an agent that runs assignments handed to it directly, with no
// CLS: run's data checks are what these tests look at.
func runner(t *testing.T, dataRoot string) *Agent {
	t.Helper()
	a := New(Config{Site: "s1", Host: "n1", OutDir: t.TempDir(), DataRoot: dataRoot})
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	a.devNull = f
	return a
}

func sumOf(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunData: with a data root, a job runs in its Cwd under the root and
// its declared files are looked for there (Local ones at their own path);
// a missing or wrong-sized input keeps the command from running and fails
// the attempt with an "input:" reason; after a zero exit the declared
// outputs are hashed and reported under their declared names, and a
// missing one fails the attempt with an "output:" reason. Local outputs
// are neither hashed nor required.
func TestRunData(t *testing.T) {
	t.Parallel()
	const cwd = "/mq-test/proj" // the CLS host's name: exists only under the root
	in := func(p string, size int64) protocol.AssignedFile {
		return protocol.AssignedFile{Path: cwd + "/" + p, Size: size}
	}
	for _, tc := range []struct {
		name    string
		setup   func(root, local string) // lay files out before the job
		inputs  func(local string) []protocol.AssignedFile
		outputs func(local string) []protocol.AssignedFile
		command string
		exit    int
		reason  string // prefix; "" = none
		ran     bool   // the command ran (made its marker)
		sums    map[string]string
		missing []string // Report.Missing ("LOCAL" stands for the host's directory)
		regular []string // in the job's directory after the attempt, regular files
		symlink []string // ... still links
	}{
		{
			name:  "inputs present, outputs hashed",
			setup: func(root, _ string) { write(t, root+cwd+"/in/a.txt", "hello"); write(t, root+cwd+"/b.txt", "xy") },
			inputs: func(string) []protocol.AssignedFile {
				return []protocol.AssignedFile{in("in/a.txt", 5), in("b.txt", -1)}
			},
			outputs: func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("out/r.txt", -1)} },
			command: "mkdir -p out && cat in/a.txt b.txt > out/r.txt",
			ran:     true,
			sums:    map[string]string{cwd + "/out/r.txt": sumOf("helloxy")},
		},
		{
			name:    "missing input",
			inputs:  func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("in/a.txt", 5)} },
			command: "true",
			exit:    exitInput,
			reason:  "input: " + cwd + "/in/a.txt missing at site s1 (host n1)",
			missing: []string{cwd + "/in/a.txt"},
		},
		{
			name:  "two inputs not whole: the first is the reason, both are named",
			setup: func(root, _ string) { write(t, root+cwd+"/ok.txt", "fine"); write(t, root+cwd+"/cut.txt", "c") },
			inputs: func(string) []protocol.AssignedFile {
				return []protocol.AssignedFile{in("ok.txt", 4), in("gone.txt", 5), in("cut.txt", 9)}
			},
			command: "true",
			exit:    exitInput,
			reason:  "input: " + cwd + "/gone.txt missing at site s1 (host n1)",
			missing: []string{cwd + "/gone.txt", cwd + "/cut.txt"},
		},
		{
			name:    "input of another size",
			setup:   func(root, _ string) { write(t, root+cwd+"/in/a.txt", "hel") },
			inputs:  func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("in/a.txt", 5)} },
			command: "true",
			exit:    exitInput,
			reason:  "input: " + cwd + "/in/a.txt at site s1 (host n1) has 3 bytes, not the 5 expected",
			missing: []string{cwd + "/in/a.txt"},
		},
		{
			name:  "input swapped for bytes of the same size: not read, staged again",
			setup: func(root, _ string) { write(t, root+cwd+"/in/a.txt", "HELLO") },
			inputs: func(string) []protocol.AssignedFile {
				return []protocol.AssignedFile{{Path: cwd + "/in/a.txt", Size: 5, SHA256: sumOf("hello")}}
			},
			command: "true",
			exit:    exitInput,
			reason:  "input: " + cwd + "/in/a.txt at site s1 (host n1) has SHA-256 " + sumOf("HELLO") + ", not the " + sumOf("hello") + " staged",
			missing: []string{cwd + "/in/a.txt"},
		},
		{
			name:  "input of the SHA-256 staged",
			setup: func(root, _ string) { write(t, root+cwd+"/in/a.txt", "hello") },
			inputs: func(string) []protocol.AssignedFile {
				return []protocol.AssignedFile{{Path: cwd + "/in/a.txt", Size: 5, SHA256: sumOf("hello")}}
			},
			command: "true",
			ran:     true,
		},
		{
			name:    "input that is a directory",
			setup:   func(root, _ string) { os.MkdirAll(root+cwd+"/in/a.txt", 0o700) },
			inputs:  func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("in/a.txt", -1)} },
			command: "true",
			exit:    exitInput,
			reason:  "input: " + cwd + "/in/a.txt at site s1 (host n1) is not a regular file",
			missing: []string{cwd + "/in/a.txt"},
		},
		{
			name:  "input present only on the host, not under the root",
			setup: func(_, local string) { write(t, local+"/a.txt", "hello") },
			inputs: func(local string) []protocol.AssignedFile {
				return []protocol.AssignedFile{{Path: local + "/a.txt", Size: 5}}
			},
			command: "true",
			exit:    exitInput,
			reason:  "input: ",
			missing: []string{"LOCAL/a.txt"},
		},
		{
			name:  "local input at its own path, local output untouched",
			setup: func(_, local string) { write(t, local+"/a.txt", "hello"); write(t, local+"/keep.txt", "old") },
			inputs: func(local string) []protocol.AssignedFile {
				return []protocol.AssignedFile{{Path: local + "/a.txt", Size: 5, Local: true}}
			},
			outputs: func(local string) []protocol.AssignedFile {
				return []protocol.AssignedFile{{Path: local + "/keep.txt", Size: -1, Local: true}, {Path: local + "/never.txt", Size: -1, Local: true}}
			},
			command: "true",
			ran:     true,
		},
		{
			name: "local input missing",
			inputs: func(local string) []protocol.AssignedFile {
				return []protocol.AssignedFile{{Path: local + "/a.txt", Size: -1, Local: true}}
			},
			command: "true",
			exit:    exitInput,
			reason:  "input: ",
		},
		{
			name:    "missing output",
			outputs: func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("r.txt", -1), in("s.txt", -1)} },
			command: "echo r > r.txt",
			ran:     true,
			exit:    1,
			reason:  "output: " + cwd + "/s.txt was not created",
		},
		{
			name: "output linked to a file of the user's out of the root: a copy is staged",
			setup: func(root, local string) {
				write(t, local+"/mine", "s")
				os.MkdirAll(root+cwd, 0o700)
				if err := os.Symlink(local+"/mine", root+cwd+"/r.txt"); err != nil {
					t.Fatal(err)
				}
			},
			outputs: func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("r.txt", -1)} },
			command: "true",
			ran:     true,
			sums:    map[string]string{cwd + "/r.txt": sumOf("s")},
			regular: []string{"r.txt"},
		},
		{
			name: "outputs linked in the job's directory, relative and absolute, through a link",
			outputs: func(string) []protocol.AssignedFile {
				return []protocol.AssignedFile{in("out.dat", -1), in("abs.dat", -1), in("sub/two.dat", -1)}
			},
			command: "mkdir -p run-3 sub && echo result > run-3/result.dat && ln -s run-3/result.dat out.dat && ln -s \"$PWD/out.dat\" abs.dat && ln -s ../abs.dat sub/two.dat",
			ran:     true,
			sums:    map[string]string{cwd + "/out.dat": sumOf("result\n"), cwd + "/abs.dat": sumOf("result\n"), cwd + "/sub/two.dat": sumOf("result\n")},
			regular: []string{"out.dat", "abs.dat", "sub/two.dat", "run-3/result.dat"},
		},
		{
			name:    "output linked to a device: refused, never read",
			outputs: func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("r.txt", -1)} },
			command: "ln -s /dev/zero r.txt",
			ran:     true,
			exit:    1,
			reason:  "output: " + cwd + "/r.txt at site s1 (host n1) is a symbolic link to \"/dev/zero\", not a regular file: mq stages what an output links to only in the job's directory or a regular file of yours",
		},
		{
			name:    "output linked to a FIFO in the job's directory: refused, not waited for",
			outputs: func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("r.txt", -1)} },
			command: "mkfifo p && ln -s p r.txt",
			ran:     true,
			exit:    1,
			reason:  "output: " + cwd + "/r.txt at site s1 (host n1) is a symbolic link to \"p\", not a regular file",
		},
		{
			name:    "output linked to a directory",
			outputs: func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("r.txt", -1)} },
			command: "mkdir d && ln -s d r.txt",
			ran:     true,
			exit:    1,
			reason:  "output: " + cwd + "/r.txt at site s1 (host n1) is a symbolic link to \"d\", not a regular file",
		},
		{
			name:    "dangling output link",
			outputs: func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("r.txt", -1)} },
			command: "ln -s nowhere r.txt",
			ran:     true,
			exit:    1,
			reason:  "output: " + cwd + "/r.txt at site s1 (host n1) is a symbolic link to \"nowhere\", which does not exist",
		},
		{
			name: "output linked to another user's file out of the root: refused",
			setup: func(root, local string) {
				other := othersFile(t, local)
				os.MkdirAll(root+cwd, 0o700)
				if err := os.Symlink(other, root+cwd+"/r.txt"); err != nil {
					t.Fatal(err)
				}
			},
			outputs: func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("r.txt", -1)} },
			command: "true",
			ran:     true,
			exit:    1,
			reason:  "output: " + cwd + "/r.txt at site s1 (host n1) is a symbolic link to ",
			symlink: []string{"r.txt"},
		},
		{
			name:    "failed command: outputs not looked at",
			outputs: func(string) []protocol.AssignedFile { return []protocol.AssignedFile{in("r.txt", -1)} },
			command: "(exit 3)",
			ran:     true,
			exit:    3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root, local := filepath.Join(t.TempDir(), "root"), t.TempDir()
			if tc.setup != nil {
				tc.setup(root, local)
			}
			asg := protocol.Assignment{ID: 7, Attempt: 1, Cwd: cwd, Command: tc.command + "; s=$?; echo ran > " + local + "/marker; exit $s"}
			if tc.inputs != nil {
				asg.Inputs = tc.inputs(local)
			}
			if tc.outputs != nil {
				asg.Outputs = tc.outputs(local)
			}
			rep := runner(t, root).run(context.Background(), asg)
			if rep.Exit != tc.exit || !strings.HasPrefix(rep.Reason, tc.reason) || (tc.reason == "") != (rep.Reason == "") {
				t.Errorf("exit %d, reason %q; want %d, %q", rep.Exit, rep.Reason, tc.exit, tc.reason)
			}
			var missing []string
			for _, m := range tc.missing {
				missing = append(missing, strings.Replace(m, "LOCAL", local, 1))
			}
			if fmt.Sprint(rep.Missing) != fmt.Sprint(missing) {
				t.Errorf("missing %q, want %q", rep.Missing, missing)
			}
			if ran := exists(local + "/marker"); ran != tc.ran {
				t.Errorf("command ran: %v, want %v", ran, tc.ran)
			}
			got := map[string]string{}
			for _, s := range rep.Outputs {
				got[s.Path] = s.SHA256
			}
			if len(got) != len(tc.sums) {
				t.Errorf("outputs %+v, want %v", rep.Outputs, tc.sums)
			}
			for p, sum := range tc.sums {
				if got[p] != sum {
					t.Errorf("output %s: sha256 %q, want %q", p, got[p], sum)
				}
			}
			for _, name := range tc.regular {
				if fi, err := os.Lstat(root + cwd + "/" + name); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("%s is not a regular file: %v, %v", name, fi, err)
				}
			}
			for _, name := range tc.symlink {
				if fi, err := os.Lstat(root + cwd + "/" + name); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("%s is no longer a link: %v, %v", name, fi, err)
				}
			}
			if b, err := os.ReadFile(local + "/keep.txt"); err == nil && string(b) != "old" {
				t.Errorf("a local output was changed: %q", b)
			}
		})
	}
}

// othersFile is a regular file another user owns: made in dir and given
// to nobody when the test runs as root, else /etc/passwd (root's).
func othersFile(t *testing.T, dir string) string {
	t.Helper()
	if os.Getuid() != 0 {
		return "/etc/passwd"
	}
	p := dir + "/others"
	write(t, p, "not yours")
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunDataRootCwd: the job runs in its Cwd mapped under the data root,
// made when missing, so relative paths resolve there; without a root the
// Cwd is used as it is.
func TestRunDataRootCwd(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "root")
	rep := runner(t, root).run(context.Background(), protocol.Assignment{ID: 1, Attempt: 1, Cwd: "/a/b", Command: "pwd -P > where"})
	if rep.Exit != 0 || rep.Reason != "" {
		t.Fatalf("job ended %+v", rep)
	}
	b, err := os.ReadFile(root + "/a/b/where")
	want, _ := filepath.EvalSymlinks(root + "/a/b")
	if err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("ran in %q (%v), want %s", b, err, want)
	}
	if fi, err := os.Stat(root + "/a/b"); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("working directory made %v, %v; want mode 0700", fi, err)
	}

	dir := t.TempDir()
	out := protocol.AssignedFile{Path: dir + "/o", Size: -1}
	rep = runner(t, "").run(context.Background(), protocol.Assignment{ID: 2, Attempt: 1, Cwd: dir, Command: "printf abc > o", Outputs: []protocol.AssignedFile{out}})
	if rep.Exit != 0 || len(rep.Outputs) != 1 || rep.Outputs[0] != (protocol.FileSum{Path: dir + "/o", Size: 3, SHA256: sumOf("abc")}) {
		t.Errorf("without a data root: %+v", rep)
	}
}

// TestRunBundleData: each job of a bundle is checked on its own: one
// whose input is missing fails without running, the next runs and
// reports its outputs.
func TestRunBundleData(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "root")
	a := runner(t, root)
	u := []protocol.Assignment{
		{ID: 1, Attempt: 1, Bundle: 1, Cwd: "/w", Command: "touch ran1", Inputs: []protocol.AssignedFile{{Path: "/w/none", Size: -1}}},
		{ID: 2, Attempt: 1, Bundle: 1, Seq: 1, Cwd: "/w", Command: "printf z > o", Outputs: []protocol.AssignedFile{{Path: "/w/o", Size: -1}}},
	}
	a.holdAll(u)
	progress := make(chan protocol.Report, len(u))
	a.runBundle(context.Background(), u, resource.Grant{}, progress, make(chan struct{}))
	r1, r2 := <-progress, <-progress
	if r1.Exit != exitInput || !strings.HasPrefix(r1.Reason, "input: /w/none missing") || exists(root+"/w/ran1") {
		t.Errorf("job 1: %+v (ran: %v)", r1, exists(root+"/w/ran1"))
	}
	if r2.Exit != 0 || r2.Reason != "" || len(r2.Outputs) != 1 || r2.Outputs[0].SHA256 != sumOf("z") || r2.Outputs[0].Path != "/w/o" {
		t.Errorf("job 2: %+v", r2)
	}
}

// TestOutputLinkIntoScratch: a copy of a replicated job ran in its scratch
// directory, where $PWD was that directory: an output linked by an
// absolute path to a file of it is read where the file went when the
// attempt won, the job's directory.
func TestOutputLinkIntoScratch(t *testing.T) {
	t.Parallel()
	const cwd = "/mq-test/rep"
	root := filepath.Join(t.TempDir(), "root")
	a := runner(t, root)
	asg := protocol.Assignment{ID: 7, Attempt: 2, Scratch: true, Cwd: cwd,
		Outputs: []protocol.AssignedFile{{Path: cwd + "/out.dat", Size: -1}}}
	work := root + cwd
	write(t, work+"/run/r.dat", "res")
	if err := os.Symlink(scratchPath(work, asg)+"/run/r.dat", work+"/out.dat"); err != nil {
		t.Fatal(err)
	}
	sums, why := a.sumOutputs(context.Background(), asg)
	if why != "" || len(sums) != 1 || sums[0].SHA256 != sumOf("res") {
		t.Fatalf("sums %+v, why %q; want the SHA-256 of the file the link named, moved into place", sums, why)
	}
	if fi, err := os.Lstat(work + "/out.dat"); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("out.dat: %v, %v; want a regular file", fi, err)
	}
}
