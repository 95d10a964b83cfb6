// Package membertest lets a test binary stand in for the jobfabric binary
// when devcluster.StartProcs runs it as a member: a test of server
// processes then runs this build's CLI without a `go build`. It is a
// package of its own because devcluster may not import the CLI (the CLI
// imports devcluster for its demo).
package membertest

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/jobfabric/jobfabric/internal/cli"
)

// Env is the variable that makes a test binary run the CLI: a test that
// starts members sets it to "1" (t.Setenv), and they inherit it.
const Env = "JOBFABRIC_TEST_CLI"

// Main is a test package's TestMain: the CLI, with the process's
// arguments, when Env is "1"; the tests otherwise.
func Main(m *testing.M) {
	if os.Getenv(Env) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}
