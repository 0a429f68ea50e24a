// Command mqsub: see `mqsub --help` and the README.
package main

import (
	"context"
	"os"

	"github.com/mq-hpc/mq/cmd/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), cli.Mqsub(cli.OSEnv()), os.Args))
}
