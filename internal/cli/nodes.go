package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
)

func newNodeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "Servers' condition: list, cordon, drain, health (admin)"}
	list := &cobra.Command{
		Use: "list", Short: "Servers with their condition and GPU use", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var ns []domain.NodeView
			if err := c.Do(cmd.Context(), "GET", "/v1/nodes", nil, &ns); err != nil {
				return err
			}
			return g.emit(ns, func(w io.Writer) {
				row(w, "SERVER", "SITE", "STRIPE", "MODEL", "USED", "TENANTS", "CONDITION", "REASON")
				for _, n := range ns {
					row(w, n.Name, n.Site, n.Stripe, n.GPUModel, fmt.Sprintf("%d/%d", n.UsedGPUs, n.GPUs), orDash(strings.Join(n.Tenants, ",")), condition(n.Condition), orDash(n.Condition.Reason))
				}
			})
		},
	}
	var reason string
	verb := func(use, short string, set func(u *api.NodeUpdateRequest)) *cobra.Command {
		c := &cobra.Command{
			Use: use + " SERVER", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				u := api.NodeUpdateRequest{Reason: reason}
				set(&u)
				var cond domain.NodeCondition
				if err := c.Do(cmd.Context(), "PATCH", "/v1/nodes/"+args[0], u, &cond); err != nil {
					return err
				}
				return g.emit(cond, func(w io.Writer) { fmt.Fprintf(w, "%s: %s\n", args[0], condition(cond)) })
			},
		}
		c.Flags().StringVar(&reason, "reason", "", "why (shown in node list and the audit trail)")
		return c
	}
	t, f := true, false
	var grace time.Duration
	drain := verb("drain", "Place nothing new and stop its jobs within --grace (default: the preemption grace)", func(u *api.NodeUpdateRequest) {
		u.Draining, u.GraceSeconds = &t, int64(grace/time.Second)
	})
	drain.Flags().DurationVar(&grace, "grace", 0, "how long the server's running jobs have to stop (e.g. 10m; 0: the scheduler's preemption grace)")
	cmd.AddCommand(list,
		verb("cordon", "Place nothing new on the server", func(u *api.NodeUpdateRequest) { u.Cordoned = &t }),
		verb("uncordon", "Allow placements on the server again", func(u *api.NodeUpdateRequest) { u.Cordoned, u.Draining = &f, &f }),
		drain,
		verb("unhealthy", "Mark the server unhealthy: nothing new is placed on it", func(u *api.NodeUpdateRequest) { u.Unhealthy = &t }),
		verb("healthy", "Mark the server healthy again", func(u *api.NodeUpdateRequest) { u.Unhealthy = &f }),
	)
	return cmd
}

func condition(c domain.NodeCondition) string {
	var parts []string
	if c.Cordoned {
		parts = append(parts, "cordoned")
	}
	if c.Draining {
		parts = append(parts, "draining")
	}
	if c.Unhealthy {
		parts = append(parts, "unhealthy")
	}
	if len(parts) == 0 {
		return "ready"
	}
	return strings.Join(parts, ",")
}
