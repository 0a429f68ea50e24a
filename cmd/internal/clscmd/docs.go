package clscmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/mq-hpc/mq/cmd/internal/agentcmd"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/cmd/internal/simcmd"
	"github.com/mq-hpc/mq/internal/pathguard"
)

// Man pages and shell completion (bash, zsh, fish) for mq's commands come
// from their urfave/cli definitions, so help, man pages and completion
// never disagree: `cls docs DIR` (hidden; scripts/install-shell.sh runs it)
// writes them. bash and zsh completion ask the command itself (urfave/cli's
// --generate-bash-completion); fish's is static. The same definitions give
// the committed CLI reference, docs/reference/cli.md (cliMarkdown; a test
// fails when the file and the flags disagree).

func clsDocs() *cli.Command {
	return &cli.Command{
		Name:      "docs",
		Usage:     "write man pages, bash, zsh and fish completion and the Markdown reference for mq's commands into DIR",
		ArgsUsage: "DIR",
		Hidden:    true,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return mqcli.Usagef("docs takes one DIR")
			}
			return writeDocs(c.Args().First())
		},
	}
}

// documentedCommand is a command documented, built as its binary builds it.
type documentedCommand struct {
	name string
	app  func(mqcli.Env) *cli.App
}

// documented are the commands documented, in the reference's order (a
// function: cls's own docs command builds them).
func documented() []documentedCommand {
	return []documentedCommand{
		{"mqsub", mqcli.Mqsub}, {"mqstat", mqcli.Mqstat}, {"mqdel", mqcli.Mqdel}, {"mqhold", mqcli.Mqhold},
		{"mqrls", mqcli.Mqrls}, {"mqalter", mqcli.Mqalter}, {"mqwait", mqcli.Mqwait}, {"cls", Cls}, {"mqsim", simcmd.Mqsim},
	}
}

// docApps are the documented commands, built to be described.
func docApps() []*cli.App {
	env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}
	var out []*cli.App
	for _, d := range documented() {
		a := d.app(env)
		mqcli.Tidy(a)
		out = append(out, a)
	}
	return out
}

// writeDocs writes every command's man page and completion scripts into
// dir: man1/NAME.1, bash/NAME, zsh/_NAME, fish/NAME.fish, and the Markdown
// reference of them all, cli.md.
func writeDocs(dir string) error {
	md, err := cliMarkdown()
	if err != nil {
		return err
	}
	root, err := docsRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	write := func(name, text string) error {
		if sub := filepath.Dir(name); sub != "." {
			if err := root.Mkdir(sub, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if err := ownDir(root, sub, filepath.Join(dir, sub)); err != nil {
				return err
			}
		}
		return root.WriteFile(name, []byte(text), 0o644)
	}
	if err := write("cli.md", md); err != nil {
		return err
	}
	for _, a := range docApps() {
		man, err := a.ToManWithSection(1)
		if err != nil {
			return fmt.Errorf("%s: man page: %w", a.Name, err)
		}
		fish, err := a.ToFishCompletion()
		if err != nil {
			return fmt.Errorf("%s: fish completion: %w", a.Name, err)
		}
		for _, f := range []struct{ path, text string }{
			{filepath.Join("man1", a.Name+".1"), man},
			{filepath.Join("bash", a.Name), strings.ReplaceAll(bashScript, "PROG", a.Name)},
			{filepath.Join("zsh", "_"+a.Name), strings.ReplaceAll(zshScript, "PROG", a.Name)},
			{filepath.Join("fish", a.Name+".fish"), fixFish(fish)},
		} {
			if err := write(f.path, f.text); err != nil {
				return err
			}
		}
	}
	return nil
}

// docsRoot makes dir if need be and opens it as the root the docs are
// written under. It must be a directory of the user's that no one else
// can write: in one others can (cls docs /tmp/x, /tmp/x made first by
// another user), they could have put a link or a second name of a file
// of the user's at a page's name, and the page would overwrite it (a
// completion script over ~/.bashrc).
func docsRoot(dir string) (*os.Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	root, err := pathguard.OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	if err := ownDir(root, ".", dir); err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}

// ownDir refuses the directory name of root (shown as shown) unless it is
// a directory others cannot change.
func ownDir(root *os.Root, name, shown string) error {
	fi, err := root.Lstat(name)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return fmt.Errorf("%s is not a directory", shown)
	}
	if why := pathguard.OthersChange(unix.Stat_t{Mode: st.Mode, Uid: st.Uid}); why != "" {
		return fmt.Errorf("%s is %s: they could put a link there to a file of yours, which a page would overwrite; give cls docs a directory of your own", shown, why)
	}
	return nil
}

// cliMarkdown renders every command's flags and subcommands as one
// Markdown page, a section per binary, as urfave/cli's ToMarkdown writes
// them. The version is left out: the page must not change per build.
func cliMarkdown() (string, error) {
	var b strings.Builder
	b.WriteString("# Command-line reference\n\n")
	b.WriteString("Generated from the commands' flag definitions by `cls docs DIR` (its `cli.md`);\n")
	b.WriteString("`go test ./cmd/internal/clscmd -run TestCLIReference -update` rewrites this file.\n")
	b.WriteString("The guide ([docs/guide](../guide/)) says when to use what.\n")
	b.WriteString("\nHow a command line is read: mqstat, mqdel, mqhold, mqrls, mqalter and mqwait take\n")
	b.WriteString("their flags after the job ids too (`mqwait 720-723 --timeout 2h`); what follows mqsub's\n")
	b.WriteString("TARGET is the job's command, its flags the job's (`mqsub y echo -t z`), except with `--rerun`.\n")
	b.WriteString("A value flag takes the word after it, unless that word is one of the command's flags:\n")
	b.WriteString("`mqstat -t -s F` is refused, exit 2 (`-t has no value: the word after it, -s, is a flag`);\n")
	b.WriteString("a value that begins with '-' is written `-t=VALUE`. The agents below refuse a value flag without its value too.\n")
	for _, a := range docApps() {
		a.Version = ""
		md, err := a.ToMarkdown()
		if err != nil {
			return "", fmt.Errorf("%s: markdown: %w", a.Name, err)
		}
		b.WriteString("\n## " + a.Name + "\n")
		b.WriteString(demote(md) + "\n")
	}
	// The agents parse their own flags (package flag, declared once in
	// agentcmd): urfave/cli knows none of them.
	for _, ag := range []struct {
		name, intro string
		mode        agentcmd.Mode
	}{
		{"cls agent", "The placeholder agent local placeholders run (`cls serve` starts them), reaching the CLS of `$MQ_HOME` over its Unix socket, or another CLS over SSH with `--cls`. Its flags are mqagent's and a few that the CLS sets for its own placeholders:", agentcmd.Local},
		{"mqagent", "The placeholder agent remote placeholders run (the CLS uploads it to each site): it reaches the CLS over SSH only.", agentcmd.Remote},
	} {
		b.WriteString("\n## " + ag.name + "\n\n" + ag.intro + "\n\n" + agentcmd.FlagsMarkdown(ag.mode) + "\n")
	}
	return b.String(), nil
}

// demote puts ToMarkdown's headings two levels down, under the page's
// title and the command's section, and drops its NAME heading (the
// section is the name).
func demote(md string) string {
	var out []string
	fence := false
	for _, l := range strings.Split(strings.TrimSpace(md), "\n") {
		switch {
		case strings.HasPrefix(l, "```"):
			fence = !fence
		case fence:
		case l == "# NAME":
			continue
		case strings.HasPrefix(l, "#"):
			l = "##" + l
		}
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// fixFish gives fish each flag name as the kind it is: urfave/cli takes a
// flag's first name for the long one, and mq's flags put the letter first
// (-q, --queue). It also drops the backticks that mark a flag's placeholder
// in help (`FILE`): fish shows descriptions as they are.
func fixFish(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "complete ") {
			continue
		}
		head, desc, hasDesc := strings.Cut(l, " -d '")
		words := strings.Split(head, " ")
		for j := 1; j < len(words); j++ {
			if words[j-1] != "-l" && words[j-1] != "-s" {
				continue
			}
			if len(words[j]) == 1 {
				words[j-1] = "-s"
			} else {
				words[j-1] = "-l"
			}
		}
		lines[i] = strings.Join(words, " ")
		if hasDesc {
			lines[i] += " -d '" + strings.ReplaceAll(desc, "`", "")
		}
	}
	return strings.Join(lines, "\n")
}

// bashScript asks the command for the words that may follow (urfave/cli's
// autocomplete/bash_autocomplete, one function per command). After a flag
// the word may be its value, which urfave/cli cannot tell from the flag's
// prefix (it would offer the flag again), so there the shell completes
// file names; after a boolean flag that loses the subcommand names.
const bashScript = `# bash completion for PROG (generated by cls docs from its flags)
_mq_complete_PROG() {
	local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" opts
	if [[ "$cur" != -* && "$prev" == -* ]]; then
		COMPREPLY=() # a flag's value: urfave/cli would offer the flag again; files instead
		return
	elif [[ "$cur" == -* ]]; then
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
	else
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
	fi
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o bashdefault -o default -F _mq_complete_PROG PROG
`

// zshScript asks the command, like bashScript. It is written to be
// autoloaded from $fpath (compinit runs the file's text as the function
// _PROG on the first TAB, so it must complete then, not only define a
// function) and to be sourced (then it registers itself with compdef).
// _CLI_ZSH_AUTOCOMPLETE_HACK makes urfave/cli print subcommands with their
// usage ("name:usage"), which _describe shows.
const zshScript = `#compdef PROG
# zsh completion for PROG (generated by cls docs from its flags)
_PROG() {
	local -a opts
	local cur=${words[CURRENT]} prev=${words[CURRENT-1]}
	if [[ "$cur" != -* && "$prev" == -* ]]; then
		_files # a flag's value: urfave/cli would offer the flag again
		return
	elif [[ "$cur" == -* ]]; then
		opts=("${(@f)$(_CLI_ZSH_AUTOCOMPLETE_HACK=1 ${words[1,CURRENT-1]} ${cur} --generate-bash-completion 2>/dev/null)}")
	else
		opts=("${(@f)$(_CLI_ZSH_AUTOCOMPLETE_HACK=1 ${words[1,CURRENT-1]} --generate-bash-completion 2>/dev/null)}")
	fi
	if [[ "${opts[1]}" != "" ]]; then
		_describe 'values' opts
	else
		_files
	fi
}
if [[ "${funcstack[1]}" == _PROG ]]; then
	_PROG "$@"
else
	compdef _PROG PROG
fi
`
