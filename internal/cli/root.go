package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
)

// globals are the flags every client command shares.
type globals struct {
	server  string
	token   string
	ca      string
	context string
	// used is the client the command made, if any: its answers tell the
	// server's API revision (warnSkew).
	used   *client.Client
	stdout io.Writer
	stderr io.Writer

	printing // output.go: -o, --no-headers, the clock and zone of times
}

// Run executes the command line and returns the process exit status
// (errors.go lists them).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetContext(ctx)
	cmd, err := root.ExecuteC()
	if cmd != nil && cmd.Name() != "version" { // version says more itself
		g.warnSkew()
	}
	if err != nil {
		fmt.Fprintln(stderr, "error:", describe(cmd, err, g.tokenGiven()))
		return exitCode(err)
	}
	return exitOK
}

// warnSkew warns when the server answered with another API revision than
// this client's: a newer client may send what an older server ignores.
func (g *globals) warnSkew() {
	if g.used == nil {
		return
	}
	if rev := g.used.ServerAPIRevision(); rev != 0 && rev != api.Revision {
		fmt.Fprintf(g.stderr, "warning: the server speaks API revision %d, this client %d (jobfabric version)\n", rev, api.Revision)
	}
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "jobfabric",
		Short:         "Control plane for shared GPU clusters: inventory, tenants, jobs, fabric",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	// No defaults from the environment or the config: cobra prints a
	// flag's default in --help, and the order flag > env > context is
	// applied when a command connects (endpoint).
	pf.StringVar(&g.server, "server", "", "API URL of any server of the cluster (default: env JOBFABRIC_SERVER, the context's server, "+defaultServer+")")
	pf.StringVar(&g.token, "token", "", "bearer token (default: env JOBFABRIC_TOKEN, the context's token file)")
	pf.StringVar(&g.ca, "ca", "", "CA certificate to verify an https server (default: env JOBFABRIC_CA, the context's CA, the system pool)")
	pf.StringVar(&g.context, "context", "", "context of the config file to use (default: env JOBFABRIC_CONTEXT, the current context)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, wide, json, yaml, name (KIND/ID lines), jsonpath=TEMPLATE, or csv (usage)")
	pf.BoolVar(&g.noHeaders, "no-headers", false, "print tables without their header and title lines")
	root.AddCommand(
		newServerCmd(g), newDemoCmd(g), newTopologyCmd(g), newTenantCmd(g), newWorkspaceCmd(g),
		newTokenCmd(g), newJobCmd(g), newEventsCmd(g), newUsageCmd(g), newClusterCmd(g), newWhoamiCmd(g), newBenchCmd(g), newNodeCmd(g), newPoolCmd(g), newFabricCmd(g), newSimCmd(g),
		newAgentCmd(g), newHostCmd(g), newSlurmCmd(g), // agent.go, binding.go
		newLabCmd(g),                      // lab.go
		newKubeCmd(g),                     // kube.go
		newConfigCmd(g), newVersionCmd(g), // config.go, version.go
	)
	// Added now rather than at Execute, so that they get examples too.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	addExamples(root)       // examples.go
	addCompletions(root, g) // complete.go
	markUsage(root)         // errors.go
	return root
}

// defaultServer is the server when no flag, variable or context names one.
const defaultServer = "http://127.0.0.1:7070"

func (g *globals) client() (*client.Client, error) {
	if err := g.checkOutput(); err != nil {
		return nil, err
	}
	server, token, ca, err := g.endpoint()
	if err != nil {
		return nil, err
	}
	var tc *tls.Config
	if strings.HasPrefix(server, "https://") {
		c, err := tlsutil.ClientConfig(ca, "")
		if err != nil {
			return nil, fmt.Errorf("load the CA certificate: %w", err)
		}
		tc = c
	}
	c, err := client.New(server, token, tc)
	if err != nil {
		return nil, usageErr(err)
	}
	g.used = c
	return c, nil
}

// endpoint resolves the server, token and CA: each from its flag, else its
// environment variable, else the context. The context's token and CA go
// only to the context's own server: a token of one cluster is never sent
// to a server named by a flag or variable.
func (g *globals) endpoint() (server, token, ca string, err error) {
	server, token, ca = firstOf(g.server, os.Getenv("JOBFABRIC_SERVER")), g.bearer(), firstOf(g.ca, os.Getenv("JOBFABRIC_CA"))
	ctx, err := g.contextFor()
	if err != nil {
		return "", "", "", err
	}
	if ctx != nil && (server == "" || server == ctx.Server) {
		server = firstOf(server, ctx.Server)
		ca = firstOf(ca, ctx.CA)
		if token == "" && ctx.TokenFile != "" {
			b, err := os.ReadFile(ctx.TokenFile)
			if err != nil {
				return "", "", "", fmt.Errorf("context %s: read its token file: %w", ctx.Name, err)
			}
			token = strings.TrimSpace(string(b))
		}
	}
	return firstOf(server, defaultServer), token, ca, nil
}

func firstOf(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

// tokenGiven reports whether a token came from anywhere (a flag, the
// environment or a context), for the hint on an unauthenticated answer.
func (g *globals) tokenGiven() bool {
	_, token, _, err := g.endpoint()
	return err == nil && token != ""
}

// checkServerURL refuses a server that is not an http(s) URL.
func checkServerURL(u string) error {
	if _, err := client.New(u, "", nil); err != nil {
		return usageErr(err)
	}
	return nil
}

// bearer is the token to send: --token, else JOBFABRIC_TOKEN.
func (g *globals) bearer() string {
	if g.token != "" {
		return g.token
	}
	return os.Getenv("JOBFABRIC_TOKEN")
}
