// Command mqsim: see `mqsim --help`, the README and docs/policies/simulator.md.
package main

import (
	"context"
	"os"

	"github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/cmd/internal/simcmd"
)

func main() {
	os.Exit(cli.Main(context.Background(), simcmd.Mqsim(cli.OSEnv()), os.Args))
}
