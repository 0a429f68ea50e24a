// Command mqrls: see `mqrls --help` and the README.
package main

import (
	"context"
	"os"

	"github.com/mq-hpc/mq/cmd/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), cli.Mqrls(cli.OSEnv()), os.Args))
}
