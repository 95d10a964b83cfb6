package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// outputFormats are the values -o completes to.
var outputFormats = []string{"table", "wide", "json", "yaml", "name", "jsonpath=", "csv"}

// completer lists candidates of one kind from the server; the word being
// completed filters them in the shell.
type completer func(ctx context.Context, c *client.Client) ([]string, error)

// completeTimeout bounds a completion's requests: a shell waits on it.
const completeTimeout = 3 * time.Second

// addCompletions wires dynamic completion to the commands' arguments and
// flags: job ids, tenants, workspaces, nodes, devices and -o values.
func addCompletions(root *cobra.Command, g *globals) {
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("context", func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		return completeContexts(cmd, nil, "")
	})
	args := map[string]completer{
		"job show": jobIDs, "job cancel": jobIDs, "job explain": jobIDs, "job watch": jobIDs, "job report": jobIDs, "job env": jobIDs,
		"tenant show": tenantNames, "tenant delete": tenantNames, "tenant update": tenantNames, "workspace list": tenantNames,
		"workspace show": workspaceRefs, "workspace delete": workspaceRefs, "workspace update": workspaceRefs,
		"node cordon": nodeNames, "node uncordon": nodeNames, "node drain": nodeNames, "node healthy": nodeNames, "node unhealthy": nodeNames,
		"host show": nodeNames, "host accept": nodeNames,
	}
	flags := map[string]completer{"tenant": tenantNames, "workspace": workspaceRefs, "node": nodeNames, "device": deviceNames}
	walk(root, func(c *cobra.Command) {
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")
		if f, ok := args[path]; ok && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = g.firstArg(f)
		}
		for name, f := range flags {
			if c.LocalFlags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, g.flagValues(f))
			}
		}
	})
	// Sub-commands that list fixed values.
	if c, _, err := root.Find([]string{"job", "list"}); err == nil {
		_ = c.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(strings.Split(stateNames(), ", "), cobra.ShellCompDirectiveNoFileComp))
	}
	if c, _, err := root.Find([]string{"usage"}); err == nil {
		_ = c.RegisterFlagCompletionFunc("by", cobra.FixedCompletions([]string{"tenant", "workspace", "job", "token"}, cobra.ShellCompDirectiveNoFileComp))
	}
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, s := range c.Commands() {
		walk(s, fn)
	}
}

// firstArg completes a command's first argument; later ones get nothing.
func (g *globals) firstArg(f completer) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return g.candidates(cmd, f)
	}
}

func (g *globals) flagValues(f completer) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return g.candidates(cmd, f)
	}
}

// candidates asks the server; a failure completes nothing rather than
// printing an error into the user's command line.
func (g *globals) candidates(cmd *cobra.Command, f completer) ([]string, cobra.ShellCompDirective) {
	c, err := g.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	c.RetryFor = 0
	ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
	defer cancel()
	out, err := f(ctx, c)
	if err != nil {
		cobra.CompDebugln("jobfabric completion: "+err.Error(), false)
		return nil, cobra.ShellCompDirectiveError
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// jobIDs are the jobs not ended yet, with their name and state as the
// description ("42\tllama-ft Running"), the most recent first.
func jobIDs(ctx context.Context, c *client.Client) ([]string, error) {
	var active []domain.JobState
	for _, s := range domain.JobStates {
		if !s.Terminal() {
			active = append(active, s)
		}
	}
	js, err := c.Jobs(ctx, client.JobQuery{States: active})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(js))
	for i := len(js) - 1; i >= 0; i-- {
		out = append(out, strconv.FormatUint(js[i].ID, 10)+"\t"+js[i].Name+" "+string(js[i].State))
	}
	return out, nil
}

func tenantNames(ctx context.Context, c *client.Client) ([]string, error) {
	ts, err := c.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out, nil
}

// workspaceRefs are TENANT/WORKSPACE of every workspace the token sees.
func workspaceRefs(ctx context.Context, c *client.Client) ([]string, error) {
	ts, err := c.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range ts {
		ws, err := c.Workspaces(ctx, t.Name)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			out = append(out, domain.Ref(t.Name, w.Name))
		}
	}
	return out, nil
}

func nodeNames(ctx context.Context, c *client.Client) ([]string, error) {
	var ns []domain.NodeView
	if err := c.Do(ctx, "GET", "/v1/nodes", nil, &ns); err != nil {
		return nil, err
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out, nil
}

func deviceNames(ctx context.Context, c *client.Client) ([]string, error) {
	var st api.FabricStatus
	if err := c.Do(ctx, "GET", "/v1/fabric/status", nil, &st); err != nil {
		return nil, err
	}
	out := make([]string, len(st.Devices))
	for i, d := range st.Devices {
		out[i] = fmt.Sprintf("%s\t%s %s", d.Name, d.Role, d.NOS)
	}
	return out, nil
}
