// Command mqagent is the placeholder agent alone (`cls agent` without the
// metaqueue and its SQLite), small enough to upload to every site: the CLS
// copies it to a cluster's login host, and each placeholder batch job runs
// it. Flags are those of `cls agent --cls` (cmd/internal/agentcmd declares them
// for both); a leading "agent" is accepted so scripts run either binary the
// same way.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mq-hpc/mq/cmd/internal/agentcmd"
	"github.com/mq-hpc/mq/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "agent" {
		args = args[1:]
	}
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "-v") {
		fmt.Fprintln(stdout, "mqagent version "+version.String())
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := agentcmd.Run(ctx, "mqagent", agentcmd.Remote, args, stderr)
	var ue agentcmd.UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "mqagent: %v (see mqagent -help)\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "mqagent: %v\n", err)
		return 1
	}
}
