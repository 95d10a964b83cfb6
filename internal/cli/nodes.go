package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
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
				header(w, wideCols(w, []any{"SERVER", "SITE", "STRIPE", "MODEL", "USED", "TENANTS", "CONDITION", "REASON"}, "NVLINK-DOMAIN", "DRIVER", "CHANGED", "BY")...)
				for _, n := range ns {
					changed := "-"
					if !n.Condition.UpdatedAt.IsZero() {
						changed = g.age(n.Condition.UpdatedAt) + " ago"
					}
					row(w, wideCols(w, []any{n.Name, n.Site, n.Stripe, n.GPUModel, fmt.Sprintf("%d/%d", n.UsedGPUs, n.GPUs), orDash(strings.Join(n.Tenants, ",")), condition(n.Condition), orDash(n.Condition.Reason)},
						orDash(n.NVLinkDomain), orDash(n.Driver), changed, orDash(n.Condition.UpdatedBy))...)
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
				var stopping []domain.Job
				if u.Draining != nil && *u.Draining {
					// Read before the drain: once it is committed the
					// scheduler starts stopping them.
					if stopping, err = jobsOn(cmd.Context(), c, args[0]); err != nil {
						return err
					}
				}
				var cond domain.NodeCondition
				if err := c.Do(cmd.Context(), "PATCH", "/v1/nodes/"+args[0], u, &cond); err != nil {
					return err
				}
				if u.Draining == nil || !*u.Draining {
					return g.emit(cond, func(w io.Writer) { fmt.Fprintf(w, "%s: %s\n", args[0], condition(cond)) })
				}
				d := nodeDrain{NodeCondition: cond, Stopping: stopping}
				return g.emit(d, func(w io.Writer) { g.drainTable(w, d, u.GraceSeconds) })
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

// nodeDrain is what node drain prints: the server's condition and the
// jobs the drain stops.
type nodeDrain struct {
	domain.NodeCondition
	Stopping []domain.Job `json:"stopping"`
}

func (d nodeDrain) names() []string {
	out := []string{"node/" + d.Server}
	for _, j := range d.Stopping {
		out = append(out, "job/"+strconv.FormatUint(j.ID, 10))
	}
	return out
}

func (p *printing) drainTable(w io.Writer, d nodeDrain, graceSeconds int64) {
	fmt.Fprintf(w, "%s: %s\n", d.Server, condition(d.NodeCondition))
	if len(d.Stopping) == 0 {
		title(w, "no jobs to stop\n")
		return
	}
	grace := "the preemption grace"
	if graceSeconds > 0 {
		grace = (time.Duration(graceSeconds) * time.Second).String()
	}
	n := fmt.Sprintf("%d jobs", len(d.Stopping))
	if len(d.Stopping) == 1 {
		n = "1 job"
	}
	title(w, "stopping %s within %s:\n", n, grace)
	p.jobTable(w, d.Stopping)
}

// jobsOn lists the jobs holding GPUs on a server: those a drain stops
// (Placed, Ready or Running; a Preempting job is already stopping).
func jobsOn(ctx context.Context, c *client.Client, server string) ([]domain.Job, error) {
	js, err := c.Jobs(ctx, client.JobQuery{})
	if err != nil {
		return nil, fmt.Errorf("list the server's jobs: %w", err)
	}
	out := []domain.Job{}
	for _, j := range js {
		if !j.State.Stoppable() {
			continue
		}
		for _, pl := range j.Placement {
			if pl.Server == server {
				out = append(out, j)
				break
			}
		}
	}
	return out, nil
}

func condition(c domain.NodeCondition) string {
	var parts []string
	switch {
	case c.Cordoned && c.Runtime != "":
		// A runtime (the Slurm bridge) cordoned it: it lifts the cordon.
		parts = append(parts, "cordoned("+c.Runtime+")")
	case c.Cordoned:
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
