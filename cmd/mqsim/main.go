// Command mqsim: see `mqsim --help`, the README and docs/simulation.md.
package main

import (
	"context"
	"os"

	"github.com/mq-hpc/mq/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), cli.Mqsim(cli.OSEnv()), os.Args))
}
