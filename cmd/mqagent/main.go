// Command mqagent is the placeholder agent alone (`cls agent` without the
// metaqueue and its SQLite), small enough to upload to every site: the CLS
// copies it to a cluster's login host, and each placeholder batch job runs
// it. Flags are those of `cls agent --cls`; a leading "agent" is accepted so
// scripts run either binary the same way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/sshkey"
	"github.com/mq-hpc/mq/placeholder"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "agent" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("mqagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("cls", "", "the CLS's SSH endpoint `HOST:PORT` (required)")
	hostKey := fs.String("host-key", "", "the CLS host key to accept: SHA256:... or a public key file (required)")
	key := fs.String("key", "", "the placeholder's private key `FILE` (required, mode 0600)")
	user := fs.String("user", "mq", "SSH user name (any; the key is what counts)")
	site := fs.String("site", "", "site name reported to the CLS (required)")
	host := fs.String("host", "", "host name reported to the CLS (default: this host's)")
	slots := fs.Int("slots", 1, "jobs to run at once")
	out := fs.String("out", "", "directory for jobs' stdout/stderr (required)")
	walltime := fs.Duration("walltime", 0, "this placeholder's own time limit (0 = none)")
	idle := fs.Duration("idle", 0, "exit after this long without work (0 = never)")
	reconnect := fs.Duration("reconnect", 10*time.Minute, "give up after the CLS is unreachable this long")
	via := fs.String("via", "", "reach --cls through this SSH server, `USER@HOST:PORT` (tunnel mode: the login host)")
	viaHostKey := fs.String("via-host-key", "", "with --via: its host public key (\"ssh-ed25519 AAAA...\")")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error (to stderr)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "mqagent: "+format+"\n", a...)
		return code
	}
	if fs.NArg() > 0 {
		return fail(2, "unexpected argument %q", fs.Arg(0))
	}
	if *addr == "" || *hostKey == "" || *key == "" || *site == "" || *out == "" {
		return fail(2, "--cls, --host-key, --key, --site and --out are required")
	}
	if *slots < 1 || *slots > 4096 {
		return fail(2, "--slots must be 1..4096, not %d", *slots)
	}
	if err := placeholder.CheckTimes(*walltime, *idle, *reconnect); err != nil {
		return fail(2, "%v", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fail(2, "--log-level: %v", err)
	}
	if *host == "" {
		*host, _ = os.Hostname()
	}
	signer, err := sshkey.LoadSigner(*key)
	if err != nil {
		return fail(1, "%v", err)
	}
	pin, err := sshkey.Pin(*hostKey)
	if err != nil {
		return fail(1, "%v", err)
	}
	cfg := client.SSH{Addr: *addr, User: *user, Signer: signer, HostKey: pin}
	if *via != "" || *viaHostKey != "" {
		if cfg.Via, err = client.ParseHop(*via, *viaHostKey); err != nil {
			return fail(2, "%v", err)
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("pid", os.Getpid())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	placeholder.OneProc()
	a := placeholder.New(placeholder.Config{
		Dial: func(ctx context.Context) (io.ReadWriteCloser, error) { return client.DialSSH(ctx, cfg) },
		Site: *site, Host: *host, BatchID: placeholder.BatchJobID(os.Getenv), Slots: *slots, OutDir: *out,
		Walltime: *walltime, IdleTimeout: *idle, Reconnect: *reconnect, StageOutput: true, Log: log,
	})
	if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fail(1, "%v", err)
	}
	return 0
}
