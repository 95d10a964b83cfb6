package cli

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
)

func newUsageCmd(g *globals) *cobra.Command {
	var q client.UsageQuery
	var ws string
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "GPU-hours and GPU-equivalent-hours, guaranteed and borrowed, per tenant, workspace, job or token",
		Long: `Report the GPUs jobs held over a period, from the replicated state: GPU-hours of
whole GPUs, GPU-equivalent-hours of everything (a MIG slice counts its compute
slices / 7, a time-sliced share its fraction), split into use within the
workspace's guarantee and borrowed use above it (decided when each job was
placed). Jobs still holding GPUs count up to now. A tenant's token sees only its
own tenant, a member's only its workspace.

--since and --until take a duration back from now (30d, 12h, 1d12h) or an
RFC 3339 time; the period is [since, until), counted to the second.
-o csv prints every column, one row per group, for spreadsheets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			g.allowCSV = true
			if err := setRef(ws, &q.Tenant, &q.Workspace); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			u, err := c.Usage(cmd.Context(), q)
			if err != nil {
				return err
			}
			if g.output == "csv" {
				return usageCSV(g.stdout, u, !g.noHeaders)
			}
			return g.emit(u, func(w io.Writer) { g.usageTable(w, u) })
		},
	}
	cmd.Flags().StringVar(&q.Tenant, "tenant", "", "only this tenant (a tenant's token: its own)")
	cmd.Flags().StringVar(&ws, "workspace", "", "only this TENANT/WORKSPACE")
	cmd.Flags().StringVar(&q.Since, "since", "30d", "start of the period: a duration back from now (30d, 12h) or an RFC 3339 time")
	cmd.Flags().StringVar(&q.Until, "until", "", "end of the period (excluded), as --since (default now)")
	cmd.Flags().StringVar(&q.By, "by", "tenant", "group by tenant, workspace, job or token")
	return cmd
}

// usageKey is the key columns of a grouping, and each row's values.
func usageKey(by string) ([]any, func(r api.UsageRow) []any) {
	switch by {
	case "workspace":
		return []any{"TENANT", "WORKSPACE"}, func(r api.UsageRow) []any { return []any{r.Tenant, r.Workspace} }
	case "job":
		return []any{"TENANT", "WORKSPACE", "JOB", "NAME", "TOKEN"}, func(r api.UsageRow) []any {
			return []any{r.Tenant, r.Workspace, r.Job, r.JobName, orDash(r.Token)}
		}
	case "token":
		return []any{"TENANT", "TOKEN"}, func(r api.UsageRow) []any { return []any{r.Tenant, orDash(r.Token)} }
	}
	return []any{"TENANT"}, func(r api.UsageRow) []any { return []any{r.Tenant} }
}

func (p *printing) usageTable(w io.Writer, u *api.Usage) {
	title(w, "Usage from %s to %s, by %s\n", p.when(u.Since), p.when(u.Until), u.By)
	keys, vals := usageKey(u.By)
	figs := func(f api.UsageFigures) []any {
		return wideCols(w, []any{hours(f.GPUHours), hours(f.GPUEquivalentHours), hours(f.GuaranteedHours), hours(f.BorrowedHours), f.Jobs}, f.GPUSeconds, f.UnitSeconds)
	}
	header(w, append(keys, wideCols(w, []any{"GPU-HOURS", "GPU-EQ-HOURS", "GUARANTEED", "BORROWED", "JOBS"}, "GPU-SECONDS", "UNIT-SECONDS")...)...)
	for _, r := range u.Rows {
		row(w, append(vals(r), figs(r.UsageFigures)...)...)
	}
	if len(u.Rows) > 1 {
		total := make([]any, len(keys))
		total[0] = "TOTAL"
		for i := 1; i < len(total); i++ {
			total[i] = ""
		}
		row(w, append(total, figs(u.Total)...)...)
	}
}

// hours renders hours in tables: two decimals (18 seconds of one GPU).
func hours(h float64) string { return strconv.FormatFloat(h, 'f', 2, 64) }

// usageCSV writes every column of every row, hours at full precision.
func usageCSV(out io.Writer, u *api.Usage, headers bool) error {
	w := csv.NewWriter(out)
	if headers {
		if err := w.Write([]string{"tenant", "workspace", "job", "job_name", "token",
			"gpu_hours", "gpu_equivalent_hours", "guaranteed_hours", "borrowed_hours", "jobs", "gpu_seconds", "unit_seconds"}); err != nil {
			return err
		}
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, r := range u.Rows {
		job := ""
		if r.Job != 0 {
			job = strconv.FormatUint(r.Job, 10)
		}
		if err := w.Write([]string{r.Tenant, r.Workspace, job, r.JobName, r.Token,
			f(r.GPUHours), f(r.GPUEquivalentHours), f(r.GuaranteedHours), f(r.BorrowedHours),
			strconv.Itoa(r.Jobs), strconv.FormatInt(r.GPUSeconds, 10), strconv.FormatInt(r.UnitSeconds, 10)}); err != nil {
			return err
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}
