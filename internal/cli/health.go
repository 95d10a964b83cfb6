package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
)

// newJobHealthCmd is `job health ID`: the job's path hop by hop, the
// verdict, and who else is on its hot links.
func newJobHealthCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "health ID",
		Short: "A job's path (GPUs, NICs, leaf ports, uplinks) with the worst signals on each hop, a verdict, and the jobs sharing its hot links",
		Long: `Show a job's path health as telemetry says now: every GPU, the NIC serving it,
the leaf port it is cabled to and the uplinks its inter-leaf traffic may cross,
each with its verdict (healthy, unknown, congested, lossy, link_errors,
gpu_errors) and the signals beyond their thresholds. Hot links shared with
other jobs list those jobs: by name when you may see them, else only counted.
The committed verdict (debounced, the one in job show, job watch and events)
is shown too. See docs/visibility.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onJob(args[0], func(c *client.Client, id uint64) error {
				h, err := c.JobHealth(cmd.Context(), id)
				if err != nil {
					return err
				}
				return g.emit(h, func(w io.Writer) { g.jobHealthTable(w, h) })
			})
		},
	}
}

func (p *printing) jobHealthTable(w io.Writer, h *api.JobHealth) {
	v := string(h.Verdict)
	if h.Message != "" {
		v += ": " + h.Message
	}
	fmt.Fprintf(w, "Job %d path: %s (at %s)\n", h.Job, v, p.when(h.At))
	if c := h.Committed; c != nil {
		fmt.Fprintf(w, "Committed: %s\n", pathHealthLine(p, c))
	}
	fmt.Fprintln(w)
	header(w, "KIND", "HOP", "VERDICT", "SIGNALS")
	for _, hop := range h.Hops {
		row(w, hop.Kind, hop.Name, hop.Verdict, orDash(signalsText(hop.Signals, hop.Note)))
	}
	if len(h.Shared) > 0 {
		fmt.Fprintln(w)
		header(w, "SHARED-LINK", "VERDICT", "OTHER-JOBS")
		for _, s := range h.Shared {
			row(w, s.Link, s.Verdict, jobsText(s.Jobs, s.OtherJobs))
		}
	}
}

// newFabricHotspotsCmd is `fabric hotspots`.
func newFabricHotspotsCmd(g *globals) *cobra.Command {
	var limit int
	var all bool
	cmd := &cobra.Command{
		Use:   "hotspots",
		Short: "The worst switch ports and uplinks on jobs' paths now, with the jobs and tenants they affect (a tenant sees only ports on its own jobs' paths)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 || limit > 1000 {
				return usagef("--limit %d must be between 1 and 1000 (0: the server's default, 50)", limit)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			h, err := c.Hotspots(cmd.Context(), limit, all)
			if err != nil {
				return err
			}
			return g.emit(h, func(w io.Writer) { hotspotsTable(w, h) })
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many ports, worst first (0: the server's default, 50)")
	cmd.Flags().BoolVar(&all, "all", false, "also the ports no job uses (platform tokens; a tenant's view is its own paths whatever it asks)")
	return cmd
}

func hotspotsTable(w io.Writer, h *api.Hotspots) {
	header(w, "PORT", "KIND", "VERDICT", "SIGNALS", "TENANTS", "JOBS")
	for _, hs := range h.Ports {
		row(w, hs.Port, hs.Kind, hs.Verdict, orDash(signalsText(hs.Signals, "")), orDash(strings.Join(hs.Tenants, ",")), jobsText(hs.Jobs, hs.OtherJobs))
	}
}

// signalsText is a hop's signals on one line: "leaf-1/swp3
// pfc_pause_rx[3]=12000/s>1000".
func signalsText(ss []api.SignalValue, note string) string {
	if len(ss) == 0 {
		return note
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		sig := s.Signal
		if s.Priority >= 0 {
			sig += "[" + strconv.Itoa(s.Priority) + "]"
		}
		parts[i] = fmt.Sprintf("%s %s=%.4g (threshold %g)", s.Entity, sig, s.Value, s.Threshold)
	}
	return strings.Join(parts, "; ")
}

// jobsText lists the jobs one may see and counts the others.
func jobsText(js []api.JobRef, others int) string {
	parts := make([]string, 0, len(js)+1)
	for _, j := range js {
		name := j.Name
		if name == "" {
			name = "job-" + strconv.FormatUint(j.ID, 10)
		}
		parts = append(parts, fmt.Sprintf("%d %s (%s/%s)", j.ID, name, j.Tenant, j.Workspace))
	}
	if others > 0 {
		parts = append(parts, fmt.Sprintf("%d other job(s)", others))
	}
	return orDash(strings.Join(parts, ", "))
}
