//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestShellCompletion installs completion with scripts/install-shell.sh
// into a scratch home and drives bash, zsh and fish as a user's TAB would,
// through the real commands: each shell must complete a flag's prefix, list
// a command's flags, complete a subcommand, and offer files (not the flag
// again) for a flag's value. zsh and fish are installed by scripts/setup.sh;
// without them their subtests skip.
func TestShellCompletion(t *testing.T) {
	home := t.TempDir()
	data, config := filepath.Join(home, "data"), filepath.Join(home, "config")
	env := []string{"HOME=" + home, "XDG_DATA_HOME=" + data, "XDG_CONFIG_HOME=" + config,
		"PATH=" + binDir + ":" + os.Getenv("PATH"), "TERM=dumb", "LANG=C.UTF-8"}
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "install-shell.sh"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := shell(t, home, env, script)
	if err != nil {
		t.Fatalf("install-shell.sh: %v\n%s", err, out)
	}
	checkManHint(t, home, env, data, out)
	// A file to offer as a flag's value.
	if err := os.WriteFile(filepath.Join(home, "jobs.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		line string   // what is typed before TAB
		want []string // among the completions
		not  []string // not among them
	}{
		{"mqsub --que", []string{"--queue"}, nil},
		{"mqstat -", []string{"--acct", "--queue", "--watch"}, nil},
		{"mqwait --ti", []string{"--timeout"}, nil},
		{"cls qu", []string{"queue"}, nil},
		{"cls queue set --max", []string{"--max-attempts"}, nil},
		{"mqsub -f ", []string{"jobs.jsonl"}, []string{"--file"}},
	}
	shells := []struct {
		name     string
		complete func(line string) ([]string, error)
	}{
		{"bash", func(line string) ([]string, error) { return bashComplete(t, home, env, data, line) }},
		{"zsh", func(line string) ([]string, error) { return zshComplete(t, home, env, data, line) }},
		{"fish", func(line string) ([]string, error) { return fishComplete(t, home, env, line) }},
	}
	for _, sh := range shells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := exec.LookPath(sh.name); err != nil {
				t.Skipf("%s is not installed (scripts/setup.sh installs it as root): its completion is untested", sh.name)
			}
			for _, c := range cases {
				got, err := sh.complete(c.line)
				if err != nil {
					t.Errorf("%s: completing %q: %v", sh.name, c.line, err)
					continue
				}
				for _, w := range c.want {
					if !slices.Contains(got, w) {
						t.Errorf("%s: completing %q: %q missing from %q", sh.name, c.line, w, got)
					}
				}
				for _, w := range c.not {
					if slices.Contains(got, w) {
						t.Errorf("%s: completing %q: %q offered: %q", sh.name, c.line, w, got)
					}
				}
			}
		})
	}
}

// shell runs a command in dir with env, bounded so that a shell waiting
// for input cannot hang the suite.
// checkManHint: `man mqsub` finds the installed page, or install-shell.sh
// said what to add to MANPATH and, added, man finds it (man-db looks in
// ~/.local/share/man only while ~/.local/bin is on PATH).
func checkManHint(t *testing.T, home string, env []string, data, out string) {
	t.Helper()
	if _, err := exec.LookPath("man"); err != nil {
		t.Log("man is not installed: the man pages' hint is unchecked")
		return
	}
	page := filepath.Join(data, "man", "man1", "mqsub.1")
	if got, _ := shell(t, home, env, "man", "-w", "mqsub"); strings.TrimSpace(got) == page {
		return
	}
	m := regexp.MustCompile(`man: add 'export MANPATH=([^']*)'`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("man does not find %s, and install-shell.sh did not say what to add:\n%s", page, out)
	}
	if got, err := shell(t, home, append(env, "MANPATH="+m[1]), "man", "-w", "mqsub"); err != nil || strings.TrimSpace(got) != page {
		t.Errorf("with MANPATH=%s, man -w mqsub: %q (%v), want %s", m[1], got, err, page)
	}
}

func shell(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// bashComplete calls the installed completion function as bash's
// programmable completion does (COMP_WORDS, COMP_CWORD), and does what
// `complete -o default` does when it offers nothing: file names.
func bashComplete(t *testing.T, dir string, env []string, data, line string) ([]string, error) {
	words := strings.Fields(line)
	cword := len(words) - 1
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
		cword++
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + w + "'"
	}
	script := `source "$1"; COMP_WORDS=(` + strings.Join(quoted, " ") + `); COMP_CWORD=` + strconv.Itoa(cword) + `
_mq_complete_` + words[0] + `
if [ ${#COMPREPLY[@]} = 0 ]; then compgen -f -- "${COMP_WORDS[COMP_CWORD]}"; else printf '%s\n' "${COMPREPLY[@]}"; fi`
	out, err := shell(t, dir, env, "bash", "-c", script, "bash", filepath.Join(data, "bash-completion", "completions", words[0]))
	return strings.Fields(out), err
}

// zshCapture runs an interactive zsh on a pseudo-terminal (the zpty
// module), loads completion from the installed $fpath directory with
// compinit, has compadd print every match it is given, types the line and
// TAB, and stops after the first completion.
const zshCapture = `zmodload zsh/zpty || exit 3
zpty z zsh -f -i
zpty -w z "PROMPT=''; RPROMPT=''; fpath=(${(q)1} \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z 'compadd() { local -a __hits; builtin compadd -A __hits "$@"; local h; for h in $__hits; do print -r -- "<"hit">$h"; done; builtin compadd "$@"; }'
zpty -w z 'comppostfuncs=(__done); __done() { print -r -- "<"done">"; exit }'
zpty -w z "$2"$'\t'
while zpty -r z out; do
	print -rn -- "$out"
	[[ $out == *'<done>'* ]] && break
done
`

func zshComplete(t *testing.T, dir string, env []string, data, line string) ([]string, error) {
	script := filepath.Join(t.TempDir(), "capture.zsh")
	if err := os.WriteFile(script, []byte(zshCapture), 0o644); err != nil {
		return nil, err
	}
	out, err := shell(t, dir, env, "zsh", "-f", script, filepath.Join(data, "zsh", "site-functions"), line)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(out, "<done>") {
		return nil, &captureError{out}
	}
	var hits []string
	for _, part := range strings.Split(out, "<hit>")[1:] {
		part, _, _ = strings.Cut(part, "<")
		hits = append(hits, strings.TrimSpace(part))
	}
	return hits, nil
}

type captureError struct{ out string }

func (e *captureError) Error() string { return "zsh never completed: " + clip(e.out) }

// fishComplete asks fish what TAB would offer (complete -C); fish loads
// the installed file from its completions directory under XDG_CONFIG_HOME.
func fishComplete(t *testing.T, dir string, env []string, line string) ([]string, error) {
	out, err := shell(t, dir, env, "fish", "-c", "complete -C "+strconv.Quote(line))
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if w, _, _ := strings.Cut(l, "\t"); w != "" {
			got = append(got, w)
		}
	}
	return got, err
}
