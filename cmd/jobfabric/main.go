// Command jobfabric is the single binary of the jobfabric control plane: the
// server, the demo, and the CLI that talks to the API.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/jobfabric/jobfabric/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
