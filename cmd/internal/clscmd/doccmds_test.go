package clscmd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/cmd/internal/agentcmd"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
)

// docCommand is one mq command line a Markdown page shows: in a ```sh
// block (run as written) or in the prose (`mqstat -j ID`, a mention).
type docCommand struct {
	file    string
	line    int
	text    string
	args    []string
	mention bool
}

// isDocCommand says whether name is a program whose command lines the
// docs are held to: a documented one, or mqagent.
func isDocCommand(name string) bool {
	for _, d := range documented() {
		if d.name == name {
			return true
		}
	}
	return name == "mqagent"
}

// errDialed ends a checked command where it would reach the CLS: all it
// checks of its command line before that passed.
var errDialed = errors.New("doc check: would reach the CLS now")

// TestDocCommands runs every mq command line of the repository's Markdown
// (README, DESIGN, docs/; not docs/history) through its command's own
// parsing and checks, up to where it would reach the CLS: a flag that does
// not exist, a value of the wrong type, a wrong subcommand or a refused
// argument (exit status 2) is a page that lies. Nothing is started (cls
// serve and mqsim's runs are stubbed; cls agent and mqagent are parsed
// only), and files the commands write go to a temporary directory.
// Placeholders written in capitals as a typed flag's value (`-j ID`,
// `--est SECONDS`) are given a value of the flag's type, and a prose
// mention of a value flag alone (`mqstat -j`) one too.
func TestDocCommands(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md").Output()
	if err != nil {
		t.Skip("git ls-files:", err)
	}
	t.Setenv("MQ_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	var cmds []docCommand
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "docs/history/") {
			continue
		}
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, docCommands(f, string(text))...)
	}
	if len(cmds) < 400 { // 598 when written
		t.Fatalf("found %d mq command lines in the docs; the extraction is broken", len(cmds))
	}
	for _, c := range cmds {
		if msg, bad := checkDocCommand(c); bad {
			t.Errorf("%s:%d: %s\n\t%s", c.file, c.line, c.text, msg)
		}
	}
}

// checkDocCommand runs c's command line as far as it goes without a CLS,
// and says what it printed and whether its command refused it.
func checkDocCommand(c docCommand) (string, bool) {
	var stderr bytes.Buffer
	env := mqcli.Env{
		Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr,
		Getwd:   os.Getwd,
		Dial:    func(context.Context) (io.ReadWriteCloser, error) { return nil, errDialed },
		Environ: func() []string { return nil },
	}
	if c.args[0] == "mqagent" {
		if c.mention {
			msg := unknownAgentFlags(c.args[1:])
			return msg, msg != ""
		}
		err := agentcmd.Parse("mqagent", agentcmd.Remote, c.args[1:])
		return errString(err), errors.As(err, new(agentcmd.UsageError))
	}
	if c.mention && len(c.args) > 1 && c.args[0] == "cls" && c.args[1] == "agent" {
		msg := unknownAgentFlags(c.args[2:])
		return msg, msg != ""
	}
	app := checkedApp(c.args[0], env)
	if c.mention {
		msg := unknownNames(app, c.args)
		return msg, msg != ""
	}
	args := fillPlaceholders(app, append([]string(nil), c.args...))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := mqcli.Run(ctx, app, args)
	if ctx.Err() != nil {
		return "did not return: " + stderr.String(), true
	}
	return strings.TrimSpace(stderr.String()), code == mqcli.ExitUsage
}

// unknownAgentFlags checks a mention of the agent's command line by its
// flags' names, as unknownNames does (package flag words an unknown one
// "unknown flag"; a known one without its value is another error).
func unknownAgentFlags(args []string) string {
	var unknown []string
	for _, a := range args {
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		for _, alt := range strings.Split(a, "/") {
			if err := agentcmd.Parse("mqagent", agentcmd.Local, []string{alt}); err != nil && strings.HasPrefix(err.Error(), "unknown flag") {
				unknown = append(unknown, "flag "+alt)
			}
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	return "unknown " + strings.Join(unknown, ", ")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkedApp is the command name as its binary builds it, with what
// would start something long stubbed: cls serve and docs do nothing, cls
// agent is parsed only, mqsim's commands simulate nothing; a command with
// subcommands refuses a name that is none of them.
func checkedApp(name string, env mqcli.Env) *cli.App {
	var app *cli.App
	for _, d := range documented() {
		if d.name == name {
			app = d.app(env)
		}
	}
	if name == "mqsim" {
		app.Action = func(*cli.Context) error { return nil }
	}
	var walk func([]*cli.Command)
	walk = func(cs []*cli.Command) {
		for _, c := range cs {
			switch {
			case name == "mqsim" || name == "cls" && (c.Name == "serve" || c.Name == "docs"):
				c.Action = func(*cli.Context) error { return nil }
			case name == "cls" && c.Name == "agent":
				c.Action = func(cc *cli.Context) error {
					var ue agentcmd.UsageError
					if err := agentcmd.Parse("cls agent", agentcmd.Local, cc.Args().Slice()); errors.As(err, &ue) {
						return mqcli.UsageOf("cls agent", ue.Msg)
					}
					return nil
				}
			case len(c.Subcommands) > 0 && c.Action == nil:
				c.Action = func(cc *cli.Context) error {
					if cc.NArg() > 0 {
						return mqcli.Usagef("unknown command %q", cc.Args().First())
					}
					return nil
				}
			}
			walk(c.Subcommands)
		}
	}
	walk(app.Commands)
	return app
}

// fillPlaceholders gives a value of its flag's type to a typed flag whose
// value is written as a placeholder in capitals (`--est SECONDS`).
func fillPlaceholders(app *cli.App, args []string) []string {
	flags, cmds := app.Flags, app.Commands
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			for _, c := range cmds {
				if c.HasName(a) {
					flags, cmds = c.Flags, c.Subcommands
					break
				}
			}
			continue
		}
		name, val, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := flagNamed(flags, name)
		if tv, ok := f.(interface{ TakesValue() bool }); !ok || !tv.TakesValue() {
			continue
		}
		sample, typed := sampleValue(f)
		switch {
		case inline:
			if typed && isPlaceholder(val) {
				args[i] = a[:len(a)-len(val)] + sample
			}
		case i+1 < len(args):
			i++
			if typed && isPlaceholder(args[i]) {
				args[i] = sample
			}
		}
	}
	return args
}

// unknownNames checks a prose mention of a command (`mqstat --cat`,
// `cls site add/set --cpus/--mem`) by its names only: every flag must be
// one of its command's, every word where a subcommand goes one of them
// (a/b names alternatives). It says what is unknown, or "".
func unknownNames(app *cli.App, args []string) string {
	flags, cmds := app.Flags, app.Commands
	var unknown []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			if len(cmds) == 0 {
				continue
			}
			var next *cli.Command
			for _, alt := range strings.Split(a, "/") {
				c := commandNamed(cmds, alt)
				if c == nil {
					unknown = append(unknown, "command "+alt)
				} else if next == nil {
					next = c
				}
			}
			if next != nil {
				flags, cmds = next.Flags, next.Subcommands
			}
			continue
		}
		var takesValue bool
		for _, alt := range strings.Split(a, "/") {
			name, _, inline := strings.Cut(strings.TrimLeft(alt, "-"), "=")
			f := flagNamed(flags, name)
			if f == nil {
				unknown = append(unknown, "flag "+alt)
			}
			tv, ok := f.(interface{ TakesValue() bool })
			takesValue = takesValue || ok && tv.TakesValue() && !inline
		}
		if takesValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++ // its value
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	return "unknown " + strings.Join(unknown, ", ")
}

func commandNamed(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

func flagNamed(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// sampleValue is a value flag f takes, and whether f's type is other than
// a string's (so a placeholder in capitals would not parse).
func sampleValue(f cli.Flag) (string, bool) {
	switch f.(type) {
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag, *cli.Float64Flag:
		return "1", true
	case *cli.DurationFlag:
		return "1s", true
	}
	return "x", false
}

var placeholderRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

func isPlaceholder(s string) bool { return placeholderRE.MatchString(s) }

// inlineCodeRE is a one-backtick code span of prose.
var inlineCodeRE = regexp.MustCompile("(^|[^`])`([^`\n]+)`")

// docCommands are the mq command lines of page file: those of its ```sh
// blocks (a line ending in \ continued), and the code spans of its prose
// that start with an mq program's name and give it arguments, unless they
// show syntax rather than a command (brackets, ellipses, alternatives).
func docCommands(file, text string) []docCommand {
	var out []docCommand
	lines := strings.Split(text, "\n")
	fence := ""
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if fence == "" {
				fence = strings.TrimPrefix(trimmed, "```")
				if fence == "" {
					fence = "text"
				}
			} else {
				fence = ""
			}
			continue
		}
		switch fence {
		case "sh":
			start := i
			for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, "\\") + " " + lines[i]
			}
			for _, args := range shellCommands(line) {
				out = append(out, docCommand{file: file, line: start + 1, text: strings.TrimSpace(line), args: args})
			}
		case "":
			for _, m := range inlineCodeRE.FindAllStringSubmatch(line, -1) {
				span := m[2]
				if strings.ContainsAny(span, "[]|<…") || strings.Contains(span, "...") {
					continue
				}
				for _, args := range shellCommands(span) {
					if len(args) > 1 {
						out = append(out, docCommand{file: file, line: i + 1, text: span, args: args, mention: true})
					}
				}
			}
		}
	}
	return out
}

// shellCommands are the mq commands of one shell line: its words split as
// sh splits them (quotes, backslashes, a comment), cut at ; && || | and
// &, without redirections, leading variable assignments and keywords; an
// ssh command's remote command counts.
func shellCommands(line string) [][]string {
	var out [][]string
	for _, words := range splitShell(line) {
		for len(words) > 0 && (shellKeyword[words[0]] || strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-")) {
			words = words[1:]
		}
		if len(words) > 0 && words[0] == "ssh" {
			for i, w := range words {
				if isDocCommand(w) {
					words = words[i:]
					break
				}
			}
		}
		if len(words) == 0 {
			continue
		}
		if name := path.Base(words[0]); isDocCommand(name) {
			words[0] = name
			out = append(out, words)
		}
	}
	return out
}

var shellKeyword = map[string]bool{"until": true, "while": true, "if": true, "then": true, "do": true, "else": true, "!": true, "time": true, "exec": true, "nohup": true, "{": true, "(": true}

// splitShell splits line into simple commands of words. Quoting is
// resolved as sh does; $(...) and `...` stay as text; a redirection and
// its word are dropped.
func splitShell(line string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord, dropNext := false, false
	end := func() {
		if inWord {
			if dropNext {
				dropNext = false
			} else {
				words = append(words, w.String())
			}
		}
		w.Reset()
		inWord = false
	}
	cut := func() {
		end()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			end()
		case c == '#' && !inWord:
			cut()
			return cmds
		case c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			inWord = true
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				j = len(line) - i - 1
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0 {
					i++
				}
				w.WriteByte(line[i])
			}
			inWord = true
		case c == '$' && i+1 < len(line) && line[i+1] == '(':
			depth := 0
			for ; i < len(line); i++ {
				w.WriteByte(line[i])
				if line[i] == '(' {
					depth++
				} else if line[i] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			inWord = true
		case c == ';' || c == '|' || c == '&' && !(i > 0 && (line[i-1] == '>' || line[i-1] == '<')):
			cut()
			for i+1 < len(line) && (line[i+1] == c) {
				i++
			}
		case c == '>' || c == '<':
			if inWord && isDigits(w.String()) {
				w.Reset() // 2>, the descriptor
				inWord = false
			}
			end()
			for i+1 < len(line) && (line[i+1] == '>' || line[i+1] == '&') {
				i++
			}
			if line[i] == '&' { // >&2, 2>&1: a descriptor follows
				for i+1 < len(line) && line[i+1] >= '0' && line[i+1] <= '9' {
					i++
				}
				continue
			}
			dropNext = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	cut()
	return cmds
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// TestSplitShell pins the splitting the docs' check relies on.
func TestSplitShell(t *testing.T) {
	for _, tc := range []struct {
		line string
		want [][]string
	}{
		{`mqsub -q bot t1 "search 1 db.fa > hits-1.txt"   # comment`, [][]string{{"mqsub", "-q", "bot", "t1", "search 1 db.fa > hits-1.txt"}}},
		{`until mqstat >/dev/null 2>&1; do sleep 0.2; done`, [][]string{{"until", "mqstat"}, {"do", "sleep", "0.2"}, {"done"}}},
		{`cls serve --local 2 &`, [][]string{{"cls", "serve", "--local", "2"}}},
		{`mqhold 1-9; mqrls 1-9`, [][]string{{"mqhold", "1-9"}, {"mqrls", "1-9"}}},
		{`mqstat --json | jq . > out.json 2> err`, [][]string{{"mqstat", "--json"}, {"jq", "."}}},
		{`export MQ_HOME=$(mktemp -d)`, [][]string{{"export", "MQ_HOME=$(mktemp -d)"}}},
		{`mqsub t 'echo it'\''s' && mqwait -t t`, [][]string{{"mqsub", "t", "echo it's"}, {"mqwait", "-t", "t"}}},
		{`cls key host --known-hosts h:2222 >> ~/.ssh/known_hosts`, [][]string{{"cls", "key", "host", "--known-hosts", "h:2222"}}},
	} {
		got := splitShell(tc.line)
		if !equalWords(got, tc.want) {
			t.Errorf("splitShell(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func equalWords(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "\x00") != strings.Join(b[i], "\x00") {
			return false
		}
	}
	return true
}
