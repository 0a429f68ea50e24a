package driver

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// shells are the POSIX shells here that the quoting is checked against:
// /bin/sh is what placeholders run; dash and bash are its usual forms.
func shells(t testing.TB) []string {
	var out []string
	for _, sh := range []string{"/bin/sh", "/bin/dash", "/bin/bash", "/usr/bin/busybox"} {
		if _, err := os.Stat(sh); err == nil {
			out = append(out, sh)
		}
	}
	if len(out) == 0 {
		t.Skip("no shell")
	}
	return out
}

// runShell runs line as placeholders do (sh -c) and returns its stdout.
func runShell(t testing.TB, sh, line string, env ...string) []byte {
	t.Helper()
	args := []string{"-c", line}
	if strings.HasSuffix(sh, "busybox") {
		args = append([]string{"sh"}, args...)
	}
	cmd := exec.Command(sh, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s -c %q: %v; stderr %q", sh, line, err, stderr.String())
	}
	return out
}

// argvBack runs args through ShellLine with printf as the program, which
// prints each argument it got followed by a NUL: what the shell passed.
func argvBack(t testing.TB, sh string, args []string) []string {
	line, err := ShellLine(append([]string{"printf", `%s\0`}, args...))
	if err != nil {
		t.Fatal(err)
	}
	out := runShell(t, sh, line)
	got := strings.Split(string(out), "\x00")
	return got[:len(got)-1]
}

var nasty = []string{
	"", " ", "  two  spaces ", "'", "''", `"`, `\`, `\\'`, "$HOME", "${HOME}", "$(echo no)", "`echo no`",
	"a;b", "a|b", "a&b", "a>b", "<", "*", "?", "[a]", "~", "~root", "#comment", "!", "{a,b}", "a=b", "-n", "--",
	"new\nline", "tab\there", "\r", "\x01\x7f", "é ü", "\xff\xfe not utf-8", "%s %d %%", "if", "then", "}", "{",
	strings.Repeat("x'y", 1000),
}

func TestShellLineRoundTrip(t *testing.T) {
	t.Parallel()
	for _, sh := range shells(t) {
		got := argvBack(t, sh, nasty)
		if len(got) != len(nasty) {
			t.Fatalf("%s: %d arguments back for %d: %q", sh, len(got), len(nasty), got)
		}
		for i := range nasty {
			if got[i] != nasty[i] {
				t.Errorf("%s: argument %d: %q back as %q", sh, i, nasty[i], got[i])
			}
		}
	}
	// The program word is never a keyword or an assignment.
	for _, prog := range []string{"if", "A=b", "!"} {
		line, _ := ShellLine([]string{prog})
		if !strings.HasPrefix(line, "'") {
			t.Errorf("program %q not quoted: %s", prog, line)
		}
	}
	for _, bad := range [][]string{nil, {""}, {"echo", "a\x00b"}} {
		if _, err := ShellLine(bad); err == nil {
			t.Errorf("ShellLine(%q): no error", bad)
		}
	}
}

func FuzzShellLine(f *testing.F) {
	for _, s := range nasty {
		f.Add(s, "x")
	}
	sh := shells(f)[0]
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.ContainsRune(a, 0) || strings.ContainsRune(b, 0) {
			if _, err := ShellLine([]string{"printf", a, b}); err == nil {
				t.Fatal("NUL accepted")
			}
			return
		}
		got := argvBack(t, sh, []string{a, b})
		if len(got) != 2 || got[0] != a || got[1] != b {
			t.Fatalf("%q %q back as %q", a, b, got)
		}
	})
}

// allBytes is every byte value, twice, and the format's own specials.
func allBytes() []byte {
	var b []byte
	for i := 0; i < 512; i++ {
		b = append(b, byte(i))
	}
	return append(b, "%%s\\\\'\n\\0 \\101"...)
}

func TestStdinReachesJob(t *testing.T) {
	t.Parallel()
	for _, sh := range shells(t) {
		for _, data := range [][]byte{allBytes(), []byte("plain text\n"), {}, []byte("no newline at the end"), []byte("-0"), []byte("--help\n"), []byte("-")} {
			w := wrap{stdin: data, hasStdin: true}
			line, err := w.script("cat")
			if err != nil {
				t.Fatal(err)
			}
			if got := runShell(t, sh, line); !bytes.Equal(got, data) {
				t.Errorf("%s: stdin %q reached the job as %q", sh, data, got)
			}
		}
	}
	w := wrap{stdin: make([]byte, MaxStdin+1), hasStdin: true}
	if _, err := w.script("cat"); err == nil || !strings.Contains(err.Error(), "MaxStdin") {
		t.Errorf("stdin over MaxStdin: %v", err)
	}
}

func FuzzStdin(f *testing.F) {
	f.Add(allBytes())
	sh := shells(f)[0]
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxStdin {
			return
		}
		w := wrap{stdin: data, hasStdin: true}
		line, err := w.script("cat")
		if err != nil {
			t.Fatal(err)
		}
		if got := runShell(t, sh, line); !bytes.Equal(got, data) {
			t.Fatalf("stdin %q reached the job as %q", data, got)
		}
	})
}

func TestEnvReachesJob(t *testing.T) {
	t.Parallel()
	for _, sh := range shells(t) {
		w := wrap{env: []string{"A=1", "B=" + nasty[len(nasty)-2], "C=two words 'q' $HOME\nline", "A=2", "EMPTY="}}
		line, err := w.script(`printf '%s\0' "$A" "$B" "$C" "${EMPTY-unset}"`)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Split(string(runShell(t, sh, line)), "\x00")
		want := []string{"2", nasty[len(nasty)-2], "two words 'q' $HOME\nline", "", ""}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: env reached the job as %q, want %q", sh, got, want)
		}
	}
	for _, bad := range []string{"NOEQUALS", "1A=x", "A-B=x", "=x", "A=nul\x00"} {
		w := wrap{env: []string{bad}}
		if _, err := w.script("true"); err == nil {
			t.Errorf("env %q: no error", bad)
		}
	}
}

func TestCombinedAndStdinFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := dir + "/it's in"
	if err := os.WriteFile(in, []byte("from a file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sh := range shells(t) {
		w := wrap{stdinFile: in, combined: true}
		line, err := w.script("cat; echo err >&2; echo out")
		if err != nil {
			t.Fatal(err)
		}
		if got := string(runShell(t, sh, line)); got != "from a file\nerr\nout\n" {
			t.Errorf("%s: %q", sh, got)
		}
	}
	w := wrap{stdinFile: in, stdin: []byte("x"), hasStdin: true}
	if _, err := w.script("cat"); err == nil {
		t.Error("stdin from bytes and a file: no error")
	}
}
