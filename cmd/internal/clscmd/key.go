package clscmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/cmd/internal/argfile"
	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/cls"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/internal/sshkey"
	"github.com/mq-hpc/mq/internal/sshserver"
	"github.com/mq-hpc/mq/protocol"
)

// clsKey manages the keys the SSH endpoint accepts. It edits
// $MQ_HOME/authorized_keys directly, so it works whether or not the CLS
// runs, and a running CLS sees changes at the next connection.
func clsKey(env mqcli.Env) *cli.Command {
	return &cli.Command{
		Name:  "key",
		Usage: "manage the SSH keys the CLS accepts, and show its host key",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "accept a public key with a role",
				ArgsUsage: "PUBKEY_FILE (- = stdin)",
				Flags:     keyFlags(),
				Action:    func(c *cli.Context) error { return keyAdd(c, env.Stdin) },
			},
			{
				Name:      "new",
				Usage:     "create a key pair (private key mode 0600) and accept it with a role",
				ArgsUsage: "PRIVATE_KEY_FILE (the public key goes beside it with .pub)",
				Flags:     keyFlags(),
				Action:    keyNew,
			},
			{
				Name:   "list",
				Usage:  "list the accepted keys",
				Action: keyList,
			},
			{
				Name:      "remove",
				Usage:     "stop accepting keys (new connections are refused; open ones keep running)",
				ArgsUsage: "FINGERPRINT|NAME...",
				Action:    keyRemove,
			},
			{
				Name:  "host",
				Usage: "print the CLS's SSH host key fingerprint and public key (created on first use), to pin in placeholders",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "known-hosts", Usage: "print a known_hosts line for `HOST:PORT` instead (for OpenSSH clients)"},
				},
				Action: keyHost,
			},
		},
	}
}

// keyFlags are the flags of key add and key new.
func keyFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "role", Usage: "user (may run mqsub/mqstat/mqdel/mqhold/mqrls/mqalter/cls queue/cls files), admin (also cls site: makes the CLS start processes and log in to clusters with your keys) or placeholder (may only pull and report work)", Required: true},
		&cli.StringFlag{Name: "name", Usage: "a `NAME` for the key in cls key list (default: the key file's comment)"},
	}
}

// keyRole is the --role of key add or key new, checked.
func keyRole(c *cli.Context) (string, error) {
	role := c.String("role")
	if !sshserver.ValidRole(role) {
		return "", mqcli.Usagef("--role must be admin, user or placeholder, not %q", role)
	}
	return role, nil
}

// maxPublicKey bounds what key add reads: an RSA key of 16384 bits
// takes about 2.8 KiB.
const maxPublicKey = 64 << 10

// keyAdd is key add: it accepts the public key in the file named (or
// read from stdin, for -) with a role.
func keyAdd(c *cli.Context, stdin io.Reader) error {
	if c.NArg() != 1 {
		return mqcli.Usagef("key add takes one PUBKEY_FILE")
	}
	role, err := keyRole(c)
	if err != nil {
		return err
	}
	// A public key is a line: read no more than fits one, from a file,
	// a pipe or /dev/zero alike.
	r, name := stdin, c.Args().First()
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("public key: %w", err)
		}
		defer f.Close()
		if err := checkPublicKeyFile(name, f, role); err != nil {
			return err
		}
		r = f
	}
	data, err := argfile.ReadAll(r, maxPublicKey)
	if err != nil {
		return fmt.Errorf("public key %s: %w", protocol.Quote(name), err)
	}
	if strings.Contains(string(data), "PRIVATE KEY") {
		return fmt.Errorf("%s is a private key; give the .pub file", c.Args().First())
	}
	pk, comment, err := sshserver.ParsePublicKey(data)
	if err != nil {
		return err
	}
	if c.IsSet("name") {
		comment = c.String("name")
	}
	kf, err := keyFile()
	if err != nil {
		return err
	}
	k, err := kf.Add(role, pk, comment)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "added %s key %s %s\n", protocol.Printable(k.Role), k.Fingerprint, protocol.Printable(k.Comment))
	return nil
}

// checkPublicKeyFile refuses a public key file that another user could
// have written or replaced (a group-writable file, or one of theirs in a
// directory they can write): the key it holds would act as the user.
// Checked on the open file, which is what is read. A pipe or a device is
// the user's own doing (cls key add - < FILE, or <(...)), as is stdin.
func checkPublicKeyFile(name string, f *os.File, role string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	t := sshkey.Trust{What: "public key", Hint: fmt.Sprintf("or, to accept it all the same, give it on stdin: cls key add --role %s - < %s", role, name)}
	return t.Check(name, fi)
}

// keyNew is key new: it creates a key pair and accepts it with a role.
func keyNew(c *cli.Context) error {
	if c.NArg() != 1 {
		return mqcli.Usagef("key new takes one PRIVATE_KEY_FILE")
	}
	role, err := keyRole(c)
	if err != nil {
		return err
	}
	path := c.Args().First()
	name := c.String("name")
	if name == "" {
		name = "mq-" + role + "-" + filepath.Base(path)
	}
	kf, err := keyFile()
	if err != nil {
		return err
	}
	pk, err := sshkey.NewKeyPair(path, name)
	if err != nil {
		return err
	}
	k, err := kf.Add(role, pk, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "created %s and %s.pub; added %s key %s %s\n", path, path, protocol.Printable(k.Role), k.Fingerprint, protocol.Printable(k.Comment))
	return nil
}

// keyList is key list.
func keyList(c *cli.Context) error {
	if c.NArg() > 0 {
		return mqcli.Usagef("key list takes no arguments")
	}
	kf, err := keyFile()
	if err != nil {
		return err
	}
	keys, err := kf.List()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tFINGERPRINT\tTYPE\tNAME")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", protocol.Printable(k.Role), k.Fingerprint, k.Key.Type(), protocol.Printable(k.Comment))
	}
	return tw.Flush()
}

// keyRemove is key remove: it stops accepting the keys each argument
// names.
func keyRemove(c *cli.Context) error {
	if c.NArg() == 0 {
		return mqcli.Usagef("key remove takes FINGERPRINT or NAME arguments")
	}
	kf, err := keyFile()
	if err != nil {
		return err
	}
	for _, sel := range c.Args().Slice() {
		removed, err := kf.Remove(sel)
		if err != nil {
			return err
		}
		for _, k := range removed {
			fmt.Fprintf(c.App.Writer, "removed %s key %s %s\n", protocol.Printable(k.Role), k.Fingerprint, protocol.Printable(k.Comment))
		}
	}
	return nil
}

// keyHost is key host: it prints the CLS's host key, made on first use.
func keyHost(c *cli.Context) error {
	if c.NArg() > 0 {
		return mqcli.Usagef("key host takes no arguments")
	}
	home, err := mqHome()
	if err != nil {
		return err
	}
	signer, err := sshserver.LoadOrCreateHostKey(filepath.Join(home, sshserver.HostKeyFileName))
	if err != nil {
		return err
	}
	pk := signer.PublicKey()
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))
	if hp := c.String("known-hosts"); hp != "" {
		fmt.Fprintf(c.App.Writer, "%s %s\n", knownHostsName(hp), line)
		return nil
	}
	fmt.Fprintln(c.App.Writer, ssh.FingerprintSHA256(pk))
	fmt.Fprintln(c.App.Writer, line)
	return nil
}

// knownHostsName writes host:port the way known_hosts wants it.
func knownHostsName(hostport string) string {
	host, port, ok := strings.Cut(hostport, ":")
	if !ok || port == "22" {
		return host
	}
	return "[" + host + "]:" + port
}

// mqHome returns $MQ_HOME, creating it (mode 0700), and refuses one
// that others could write (cls.OpenHome).
func mqHome() (string, error) {
	home, err := client.Home()
	if err != nil {
		return "", err
	}
	home, _, err = cls.OpenHome(home)
	return home, err
}

func keyFile() (*sshserver.KeyFile, error) {
	home, err := mqHome()
	if err != nil {
		return nil, err
	}
	return sshserver.NewKeyFile(filepath.Join(home, sshserver.KeyFileName)), nil
}

// sshCommands are the commands a user key may run over SSH; an admin key
// may also run `cls site`. `cls files` is a user's: its ops act with the
// owner's rights, as the jobs a user key may already submit do.
var sshCommands = "mqsub, mqstat, mqdel, mqhold, mqrls, mqalter, cls queue, cls files"

// sshExec runs a user's command over SSH in-process, talking to the CLS
// through a pipe into proto (not the socket: it works however the CLS was
// started, and costs no process) with the key's role.
func sshExec(dialCLS func(server.Peer) io.ReadWriteCloser) sshserver.ExecFunc {
	return func(ctx context.Context, who server.Peer, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		env := mqcli.Env{Stdin: stdin, Stdout: stdout, Stderr: stderr,
			Getwd: os.UserHomeDir, // like an ssh login: jobs run in the home directory unless -d says
			Dial:  func(context.Context) (io.ReadWriteCloser, error) { return dialCLS(who), nil },
			InCLS: true, // files the command names are read by the CLS: regular ones only
		}
		var app *cli.App
		switch filepath.Base(args[0]) {
		case "mqsub":
			app = mqcli.Mqsub(env)
		case "mqstat":
			app = mqcli.Mqstat(env)
		case "mqdel":
			app = mqcli.Mqdel(env)
		case "mqhold":
			app = mqcli.Mqhold(env)
		case "mqrls":
			app = mqcli.Mqrls(env)
		case "mqalter":
			app = mqcli.Mqalter(env)
		case "cls":
			if len(args) >= 2 && args[1] == "site" && who.MaxRole != protocol.RoleAdmin {
				fmt.Fprintln(stderr, "mq: `cls site` over SSH needs a key with the admin role (cls key add --role admin); this key may run "+sshCommands)
				return mqcli.ExitUsage
			}
			if len(args) < 2 || (args[1] != "queue" && args[1] != "files" && args[1] != "site") {
				fmt.Fprintf(stderr, "mq: only `cls queue` and `cls files` (and, with an admin key, `cls site`) run over SSH (one of: %s)\n", sshCommands)
				return mqcli.ExitUsage
			}
			app = Cls(env)
		default:
			fmt.Fprintf(stderr, "mq: unknown command %q (one of: %s)\n", args[0], sshCommands)
			return 127
		}
		return mqcli.Run(ctx, app, args)
	}
}
