// Command mqhold: see `mqhold --help` and the README.
package main

import (
	"context"
	"os"

	"github.com/mq-hpc/mq/cmd/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), cli.Mqhold(cli.OSEnv()), os.Args))
}
