// Command cls: see `cls --help` and the README.
package main

import (
	"context"
	"os"

	"github.com/mq-hpc/mq/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), cli.Cls(cli.OSEnv()), os.Args))
}
