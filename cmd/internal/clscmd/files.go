package clscmd

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/mq-hpc/mq/cmd/internal/acct"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/client"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/protocol"
)

// clsFiles is the data-staging catalog's command (ops files.*): the files
// jobs declared, the places holding a replica of each, copies back to the
// CLS host. Paths are the CLS host's names; a relative one is resolved
// against the current directory, as mqsub --in/--out resolve theirs.
func clsFiles(env mqcli.Env) *cli.Command {
	return &cli.Command{
		Name:  "files",
		Usage: "the catalog of jobs' declared files and their replicas at sites (data staging)",
		Subcommands: []*cli.Command{
			filesCmd(env, "list", "list catalog files with size, checksum and the places holding them", "[PREFIX]", filesListFlags, filesList),
			filesCmd(env, "get", "copy a file from a place holding it to the CLS host, verified (DEST default: PATH itself)", "PATH [DEST]", filesGetFlags, filesGet),
			filesCmd(env, "add", "register a file that already exists at a site (the CLS measures and hashes it there)", "PATH", filesAddFlags, filesAdd),
			filesCmd(env, "rm", "drop a file's replicas at a site or everywhere (the last one of a file jobs still read only with --force)", "PATH", filesRmFlags, filesRm),
		},
	}
}

// filesValues are the flags of the files commands (each declares its own
// from these).
type filesValues struct {
	site, host  string
	force, json bool
}

func filesListFlags(v *filesValues) []cli.Flag {
	return []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON", Destination: &v.json}}
}

func filesGetFlags(v *filesValues) []cli.Flag {
	return []cli.Flag{&cli.StringFlag{Name: "site", Usage: "copy from this site's replica (default: the place the CLS finds best)", Destination: &v.site}}
}

func filesAddFlags(v *filesValues) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "site", Usage: "the site holding the file (required)", Destination: &v.site},
		&cli.StringFlag{Name: "host", Usage: "the host holding it, at sites whose nodes share no filesystem", Destination: &v.host},
	}
}

func filesRmFlags(v *filesValues) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "site", Usage: "drop the replica at this site only (default: every place)", Destination: &v.site},
		&cli.BoolFlag{Name: "force", Usage: "drop even the last replica of a file that live jobs read", Destination: &v.force},
	}
}

// filesCmd is one files subcommand: flags declared once (for --help and
// for parseFlags, so they may stand before or after the arguments), the
// action given the arguments, the flags' values and a connection.
func filesCmd(env mqcli.Env, name, usage, args string, flags func(*filesValues) []cli.Flag,
	action func(c *cli.Context, env mqcli.Env, args []string, v filesValues) error) *cli.Command {
	return &cli.Command{
		Name:            name,
		Usage:           usage,
		ArgsUsage:       args,
		SkipFlagParsing: true,
		Flags:           flags(&filesValues{}),
		Action: func(c *cli.Context) error {
			var v filesValues
			args, _, err := parseFlags(c, flags(&v))
			if errors.Is(err, flag.ErrHelp) {
				return cli.ShowSubcommandHelp(c)
			}
			if err != nil {
				return err
			}
			return action(c, env, args, v)
		},
	}
}

// absPath resolves a relative path against the current directory, keeping
// a trailing slash (a prefix "seqs/" lists the directory's files only).
func absPath(env mqcli.Env, p string) (string, error) {
	if p == "" || filepath.IsAbs(p) {
		return p, nil
	}
	wd, err := env.Getwd()
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", p, err)
	}
	abs := filepath.Join(wd, p)
	if strings.HasSuffix(p, "/") && abs != "/" {
		abs += "/"
	}
	return abs, nil
}

// onePath checks a command takes one PATH and resolves it.
func onePath(env mqcli.Env, cmd string, args []string) (string, error) {
	if len(args) != 1 || args[0] == "" {
		return "", mqcli.Usagef("files %s takes one PATH", cmd)
	}
	return absPath(env, args[0])
}

func filesList(c *cli.Context, env mqcli.Env, args []string, v filesValues) error {
	if len(args) > 1 {
		return mqcli.Usagef("files list takes at most one PREFIX")
	}
	q := protocol.FilesQuery{}
	if len(args) == 1 {
		p, err := absPath(env, args[0])
		if err != nil {
			return err
		}
		q.Prefix = p
	}
	cl, err := mqcli.Dial(c.Context, env, "cls")
	if err != nil {
		return err
	}
	defer cl.Close()
	w := c.App.Writer
	var tw *tabwriter.Writer
	first := true
	if v.json {
		io.WriteString(w, "[")
	} else {
		tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "PATH\tSIZE\tSHA256\tREPLICAS")
	}
	for {
		r, err := client.Do(c.Context, cl, protocol.OpFilesList, q)
		if err != nil {
			return err
		}
		for _, f := range r.Files {
			if v.json {
				if !first {
					io.WriteString(w, ",\n")
				}
				first = false
				b, _ := json.Marshal(f)
				w.Write(b)
				continue
			}
			fmt.Fprintln(tw, catalogRow(f))
		}
		if tw != nil {
			tw.Flush() // one block per page keeps memory bounded
		}
		if !r.More {
			break
		}
		// A CLS that says More without moving on would loop forever.
		if len(r.Files) == 0 || r.Files[len(r.Files)-1].Path <= q.After {
			return errors.New("the CLS's catalog pages do not advance")
		}
		q.After = r.Files[len(r.Files)-1].Path
	}
	if v.json {
		io.WriteString(w, "]\n")
	}
	return nil
}

// catalogRow is a file's row of cls files list (tab-separated, escaped).
func catalogRow(f protocol.CatalogFile) string {
	size := "-"
	if f.Size != nil {
		size = acct.HumanBytes(*f.Size)
	}
	pr := protocol.Printable
	return fmt.Sprintf("%s\t%s\t%s\t%s", pr(f.Path), size, pr(mqcli.ShortSum(f.SHA256)), pr(mqcli.Replicas(f.Replicas)))
}

func filesGet(c *cli.Context, env mqcli.Env, args []string, v filesValues) error {
	if len(args) < 1 || len(args) > 2 || args[0] == "" {
		return mqcli.Usagef("files get takes PATH and an optional DEST")
	}
	g := protocol.FilesGet{Site: v.site}
	var err error
	if g.Path, err = absPath(env, args[0]); err != nil {
		return err
	}
	if len(args) == 2 {
		if args[1] == "" {
			return mqcli.Usagef("files get: DEST is empty")
		}
		// The CLS writes DEST; it may run in another directory.
		if g.Dest, err = absPath(env, args[1]); err != nil {
			return err
		}
	}
	cl, err := mqcli.Dial(c.Context, env, "cls")
	if err != nil {
		return err
	}
	defer cl.Close()
	t, err := client.Do(c.Context, cl, protocol.OpFilesGet, g)
	if err != nil {
		return err
	}
	dest := g.Dest
	if dest == "" {
		dest = g.Path
	}
	if t.Error != "" {
		return fmt.Errorf("copying %s: %s", t.Path, mqcli.TransferLine(t))
	}
	fmt.Fprintf(c.App.Writer, "copied %s to %s: %s\n", protocol.Printable(t.Path), protocol.Printable(dest), protocol.Printable(mqcli.TransferLine(t)))
	return nil
}

func filesAdd(c *cli.Context, env mqcli.Env, args []string, v filesValues) error {
	p, err := onePath(env, "add", args)
	if err != nil {
		return err
	}
	if v.site == "" {
		return mqcli.Usagef("files add needs --site")
	}
	cl, err := mqcli.Dial(c.Context, env, "cls")
	if err != nil {
		return err
	}
	defer cl.Close()
	f, err := client.Do(c.Context, cl, protocol.OpFilesAdd, protocol.FilesAdd{Path: p, Site: v.site, Host: v.host})
	if err != nil {
		return err
	}
	printCatalog(c.App.Writer, f)
	return nil
}

func filesRm(c *cli.Context, env mqcli.Env, args []string, v filesValues) error {
	p, err := onePath(env, "rm", args)
	if err != nil {
		return err
	}
	cl, err := mqcli.Dial(c.Context, env, "cls")
	if err != nil {
		return err
	}
	defer cl.Close()
	f, err := client.Do(c.Context, cl, protocol.OpFilesRemove, protocol.FilesRemove{Path: p, Site: v.site, Force: v.force})
	if err != nil {
		return err
	}
	printCatalog(c.App.Writer, f)
	return nil
}

// printCatalog shows one file as cls files list does.
func printCatalog(w io.Writer, f protocol.CatalogFile) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSIZE\tSHA256\tREPLICAS")
	fmt.Fprintln(tw, catalogRow(f))
	tw.Flush()
}
