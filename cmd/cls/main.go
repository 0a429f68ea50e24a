// Command cls: see `cls --help` and the README.
package main

import (
	"context"
	"os"

	"github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/cmd/internal/clscmd"
)

func main() {
	os.Exit(cli.Main(context.Background(), clscmd.Cls(cli.OSEnv()), os.Args))
}
