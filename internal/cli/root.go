package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
)

// globals are the flags every client command shares.
type globals struct {
	server string
	token  string
	ca     string
	stdout io.Writer
	stderr io.Writer

	printing // output.go: -o, --no-headers, the clock and zone of times
}

// Run executes the command line and returns the process exit status.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", describe(err))
		return 1
	}
	return 0
}

// describe renders an error for a person: the message, the field and every
// detail of a multi-problem error.
func describe(err error) string {
	var de *domain.Error
	if !errors.As(err, &de) {
		return err.Error()
	}
	s := de.Message
	if de.Field != "" {
		s += " [field " + de.Field + "]"
	}
	s += " (" + string(de.Code) + ")"
	for _, d := range de.Details {
		s += "\n  - "
		if d.Field != "" {
			s += d.Field + ": "
		}
		s += d.Message
		if d.Rule != "" {
			s += " [rule " + d.Rule + "]"
		}
	}
	return s
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "jobfabric",
		Short:         "Control plane for shared GPU clusters: inventory, tenants, jobs, fabric",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", envOr("JOBFABRIC_SERVER", "http://127.0.0.1:7070"), "API URL of any server of the cluster (env JOBFABRIC_SERVER)")
	// No default from the environment: cobra prints a flag's default in
	// --help, and a token is a secret (bearer() reads the variable).
	pf.StringVar(&g.token, "token", "", "bearer token (default: env JOBFABRIC_TOKEN)")
	pf.StringVar(&g.ca, "ca", os.Getenv("JOBFABRIC_CA"), "CA certificate to verify an https server (env JOBFABRIC_CA; default: system pool)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, wide, json, yaml, name (KIND/ID lines) or jsonpath=TEMPLATE")
	pf.BoolVar(&g.noHeaders, "no-headers", false, "print tables without their header and title lines")
	root.AddCommand(
		newServerCmd(g), newDemoCmd(g), newTopologyCmd(g), newTenantCmd(g), newWorkspaceCmd(g),
		newTokenCmd(g), newJobCmd(g), newEventsCmd(g), newClusterCmd(g), newWhoamiCmd(g), newBenchCmd(g), newNodeCmd(g), newFabricCmd(g), newSimCmd(g),
		newAgentCmd(g), newHostCmd(g), newSlurmCmd(g), // agent.go, binding.go
		newLabCmd(g), // lab.go
	)
	return root
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (g *globals) client() (*client.Client, error) {
	if err := g.checkOutput(); err != nil {
		return nil, err
	}
	var tc *tls.Config
	if strings.HasPrefix(g.server, "https://") {
		c, err := tlsutil.ClientConfig(g.ca, "")
		if err != nil {
			return nil, fmt.Errorf("load --ca: %w", err)
		}
		tc = c
	}
	return client.New(g.server, g.bearer(), tc)
}

// bearer is the token to send: --token, else JOBFABRIC_TOKEN.
func (g *globals) bearer() string {
	if g.token != "" {
		return g.token
	}
	return os.Getenv("JOBFABRIC_TOKEN")
}
