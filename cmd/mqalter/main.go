// Command mqalter: see `mqalter --help` and the README.
package main

import (
	"context"
	"os"

	"github.com/mq-hpc/mq/cmd/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), cli.Mqalter(cli.OSEnv()), os.Args))
}
