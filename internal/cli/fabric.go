package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

func newFabricCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "fabric", Short: "The network: device configs per revision, diffs, deploy, verify (admin); hotspots"}

	var watch bool
	status := &cobra.Command{
		Use: "status", Short: "The latest revision and each device's deployed revision and last error", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			fetch := func(ctx context.Context) (api.FabricStatus, error) {
				var st api.FabricStatus
				err := c.Do(ctx, "GET", "/v1/fabric/status", nil, &st)
				return st, err
			}
			if watch {
				return watchObject(cmd.Context(), g, fetch, func(w io.Writer, st api.FabricStatus) { fabricStatusTable(w, &st) })
			}
			st, err := fetch(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(st, func(w io.Writer) { fabricStatusTable(w, &st) })
		},
	}
	addWatchFlag(status, &watch, "the status again whenever it changes (a new revision, a device deployed or failing)")

	revisions := &cobra.Command{
		Use: "revisions", Short: "The kept revisions: when, why, which devices changed", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var rs []api.RevisionInfo
			if err := c.Do(cmd.Context(), "GET", "/v1/fabric/revisions", nil, &rs); err != nil {
				return err
			}
			return g.emit(rs, func(w io.Writer) {
				header(w, wideCols(w, []any{"REV", "AGE", "CHANGED", "REMOVED", "CAUSE"}, "AT", "VERIFY")...)
				for _, r := range rs {
					cause := r.Cause
					switch {
					case r.Blocked && len(r.Verify) > 0:
						cause = fmt.Sprintf("BLOCKED, verify failed: %s (%d failures); %s", r.Verify[0], len(r.Verify), cause)
					case r.Override != "":
						cause = fmt.Sprintf("deployed over the verifier by %s; %s", r.Override, cause)
					}
					row(w, wideCols(w, []any{r.Rev, g.age(r.At), orDash(strings.Join(r.Changed, ",")), orDash(strings.Join(r.Removed, ",")), orDash(cause)},
						g.when(r.At), orDash(strings.Join(r.Verify, "; ")))...)
				}
			})
		},
	}

	var rev uint64
	var device, nos string
	renderCmd := &cobra.Command{
		Use: "render", Short: "Print device configurations: of a revision, or of the current state for another NOS", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if rev > 0 {
				q.Set("rev", strconv.FormatUint(rev, 10))
			}
			if device != "" {
				q.Set("device", device)
			}
			if nos != "" {
				q.Set("nos", nos)
			}
			var out []render.DeviceFiles
			if err := c.Do(cmd.Context(), "GET", "/v1/fabric/configs?"+q.Encode(), nil, &out); err != nil {
				return err
			}
			return g.emit(out, func(w io.Writer) {
				for _, d := range out {
					for _, f := range d.Files {
						fmt.Fprintf(w, "==== %s/%s (%s)\n%s", d.Device, f.Name, d.NOS, f.Content)
						if !strings.HasSuffix(f.Content, "\n") {
							fmt.Fprintln(w)
						}
					}
				}
			})
		},
	}
	renderCmd.Flags().Uint64Var(&rev, "rev", 0, "revision (default: the latest)")
	renderCmd.Flags().StringVar(&device, "device", "", "only this device")
	renderCmd.Flags().StringVar(&nos, "nos", "", "render the current state as this NOS ("+strings.Join(render.NOSes(), ", ")+") instead of each device's own")

	var from, to uint64
	var diffDevice string
	var stat bool
	diff := &cobra.Command{
		Use: "diff", Short: "Per-device minimal diff between two revisions (default: the latest and the one before)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if cmd.Flags().Changed("from") {
				q.Set("from", strconv.FormatUint(from, 10))
			}
			if to > 0 {
				q.Set("to", strconv.FormatUint(to, 10))
			}
			if diffDevice != "" {
				q.Set("device", diffDevice)
			}
			var d api.FabricDiff
			if err := c.Do(cmd.Context(), "GET", "/v1/fabric/diff?"+q.Encode(), nil, &d); err != nil {
				return err
			}
			if stat {
				st := diffStat(d)
				return g.emit(st, func(w io.Writer) { diffStatTable(w, st) })
			}
			return g.emit(d, func(w io.Writer) {
				fmt.Fprintf(w, "revision %d -> %d: %d devices differ\n", d.From, d.To, len(d.Devices))
				for _, x := range d.Devices {
					fmt.Fprint(w, x.Text)
					if !strings.HasSuffix(x.Text, "\n") {
						fmt.Fprintln(w)
					}
				}
			})
		},
	}
	diff.Flags().Uint64Var(&from, "from", 0, "older revision (0: an empty fabric)")
	diff.Flags().Uint64Var(&to, "to", 0, "newer revision (default: the latest)")
	diff.Flags().StringVar(&diffDevice, "device", "", "only this device")
	diff.Flags().BoolVar(&stat, "stat", false, "only count the lines each device adds and removes")

	var override string
	deployCmd := &cobra.Command{
		Use: "deploy", Short: "Compile and deploy now, retrying failed devices; exits non-zero if a device failed", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var st api.FabricStatus
			path := "/v1/fabric/deploy"
			if cmd.Flags().Changed("override") {
				path += "?override=" + url.QueryEscape(override)
			}
			if err := c.Do(cmd.Context(), "POST", path, nil, &st); err != nil {
				return err
			}
			if err := g.emit(st, func(w io.Writer) { fabricStatusTable(w, &st) }); err != nil {
				return err
			}
			var failed []string
			for _, d := range st.Devices {
				if d.Error != "" {
					failed = append(failed, d.Name+": "+d.Error)
				}
			}
			if len(failed) > 0 {
				return fmt.Errorf("deploy failed on %d devices (the others are applied whole):\n  %s", len(failed), strings.Join(failed, "\n  "))
			}
			return nil
		},
	}
	deployCmd.Flags().StringVar(&override, "override", "", "deploy the latest revision although the verifier blocked it (`fabric status` says so); the reason, recorded in the events with your name")
	var matrix bool
	verifyCmd := &cobra.Command{
		Use: "verify", Short: "Prove on the current intent that tenants (and jobs of segmented tenants) cannot reach each other, ids are unique, bindings match allocations; exits non-zero with a report when not", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			path := "/v1/fabric/verify"
			if matrix {
				path += "?matrix=true"
			}
			var v api.FabricVerify
			if err := c.Do(cmd.Context(), "GET", path, nil, &v); err != nil {
				return err
			}
			if err := g.emit(v, func(w io.Writer) {
				fmt.Fprint(w, v.Text)
				if !strings.HasSuffix(v.Text, "\n") {
					fmt.Fprintln(w)
				}
				if matrix {
					keys := make([]string, 0, len(v.Reachability))
					for k := range v.Reachability {
						keys = append(keys, k)
					}
					slices.Sort(keys)
					for _, k := range keys {
						fmt.Fprintf(w, "%s -> %s\n", k, orDash(strings.Join(v.Reachability[k], " ")))
					}
				}
			}); err != nil {
				return err
			}
			if !v.OK {
				return fmt.Errorf("fabric verify failed: see the report above")
			}
			return nil
		},
	}
	verifyCmd.Flags().BoolVar(&matrix, "matrix", false, "also print which server port reaches which (as the deployed NOSes enforce it)")
	cmd.AddCommand(status, revisions, renderCmd, diff, deployCmd, verifyCmd, newFabricHotspotsCmd(g), newFabricOptionsCmd(g))
	return cmd
}

// newFabricOptionsCmd shows the fabric options, or changes those a flag
// names (the others keep their value).
func newFabricOptionsCmd(g *globals) *cobra.Command {
	var placement, l3 string
	cmd := &cobra.Command{
		Use: "options", Short: "Show or change the fabric options: where tenants' VRFs are placed, each leaf's L3 VLAN range", Args: cobra.NoArgs,
		Example: "  jobfabric fabric options\n  jobfabric fabric options --vrf-placement used\n  jobfabric fabric options --l3-vlans 3000-3967",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			o, err := c.FabricOptions(cmd.Context())
			if err != nil {
				return err
			}
			fl := cmd.Flags()
			if fl.Changed("vrf-placement") || fl.Changed("l3-vlans") {
				if fl.Changed("vrf-placement") {
					o.VRFPlacement = placement
				}
				if fl.Changed("l3-vlans") {
					lo, hi, ok := strings.Cut(l3, "-")
					a, errA := strconv.ParseUint(lo, 10, 32)
					b, errB := strconv.ParseUint(hi, 10, 32)
					if !ok || errA != nil || errB != nil {
						return domain.Invalid("l3-vlans", "%q is not a range MIN-MAX (such as 3000-3967)", l3)
					}
					o.L3VLANMin, o.L3VLANMax = uint32(a), uint32(b)
				}
				if o, err = c.SetFabricOptions(cmd.Context(), *o); err != nil {
					return err
				}
			}
			return g.emit(o, func(w io.Writer) {
				fmt.Fprintf(w, "VRF placement: %s\n", o.VRFPlacement)
				fmt.Fprintf(w, "L3 VLANs per leaf: %d-%d\n", o.L3VLANMin, o.L3VLANMax)
			})
		},
	}
	cmd.Flags().StringVar(&placement, "vrf-placement", "", "all (every tenant's VRF on every leaf of its sites) or used (only on leaves where the tenant owns a port)")
	cmd.Flags().StringVar(&l3, "l3-vlans", "", "each leaf's L3 VLAN range MIN-MAX within 3000-4094 (NX-OS and SONiC leaves: one VLAN per VRF)")
	return cmd
}

// fabricDiffStat is fabric diff --stat: per device, the lines of
// configuration its change adds and removes.
type fabricDiffStat struct {
	From    uint64           `json:"from"`
	To      uint64           `json:"to"`
	Devices []deviceDiffStat `json:"devices"`
}

type deviceDiffStat struct {
	Device  string `json:"device"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
}

func (s fabricDiffStat) names() []string {
	out := []string{}
	for _, d := range s.Devices {
		out = append(out, "device/"+d.Device)
	}
	return out
}

func diffStat(d api.FabricDiff) fabricDiffStat {
	out := fabricDiffStat{From: d.From, To: d.To, Devices: []deviceDiffStat{}}
	for _, x := range d.Devices {
		a, r := countDiffLines(x.Device, x.Text)
		out.Devices = append(out.Devices, deviceDiffStat{Device: x.Device, Added: a, Removed: r})
	}
	return out
}

// countDiffLines counts the added and removed lines of a device's diff as
// the server renders it (render.DeviceDiff.String): per file either a
// "# DEVICE/FILE (nos, change)" header and Junos delete/set commands, or a
// "--- a/DEVICE/FILE" "+++ b/DEVICE/FILE" header and -U0 hunks.
func countDiffLines(device, text string) (added, removed int) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	junos := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case l == "":
			continue
		case strings.HasPrefix(l, "# "+device+"/"):
			junos = true
			continue
		case (strings.HasPrefix(l, "--- a/"+device+"/") || l == "--- /dev/null") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			junos = false
			i++ // the +++ line
			continue
		}
		switch {
		case junos && strings.HasPrefix(l, "delete "):
			removed++
		case junos && strings.HasPrefix(l, "set "):
			added++
		case junos, strings.HasPrefix(l, "@@"):
		case strings.HasPrefix(l, "+"):
			added++
		case strings.HasPrefix(l, "-"):
			removed++
		}
	}
	return added, removed
}

func diffStatTable(w io.Writer, s fabricDiffStat) {
	title(w, "revision %d -> %d: %d devices differ\n", s.From, s.To, len(s.Devices))
	header(w, "DEVICE", "ADDED", "REMOVED")
	var a, r int
	for _, d := range s.Devices {
		row(w, d.Device, "+"+strconv.Itoa(d.Added), "-"+strconv.Itoa(d.Removed))
		a, r = a+d.Added, r+d.Removed
	}
	title(w, "total\t+%d\t-%d\n", a, r)
}

func fabricStatusTable(w io.Writer, st *api.FabricStatus) {
	title(w, "latest revision: %d\n", st.Revision)
	if st.Blocked != "" {
		title(w, "BLOCKED: %s\n", st.Blocked)
		title(w, "the devices stay on revision %d; jobfabric fabric revisions lists the failures, jobfabric fabric deploy --override REASON deploys it anyway\n", st.Deployable)
	}
	if l := st.LastDeploy; l != nil {
		title(w, "revision %d deployed in full in %.1fs (%d rounds, %d device deploys)\n", l.Rev, l.Seconds, l.Rounds, l.Devices)
	}
	header(w, "DEVICE", "ROLE", "NOS", "CHANGED-IN", "DEPLOYED", "STATE", "ERROR")
	for _, d := range st.Devices {
		s := "in sync"
		switch {
		case d.Error != "":
			s = "failed"
		case d.Deployed != d.DesiredHash && st.Blocked != "" && d.DesiredRev > st.Deployable:
			s = "blocked"
		case d.Deployed != d.DesiredHash:
			s = "pending"
		}
		row(w, d.Name, d.Role, d.NOS, d.DesiredRev, d.DeployedRev, s, orDash(d.Error))
	}
	// A switch's conditions that need a person (a reload, a forwarding
	// restart the deploy caused), under the table, like a node's.
	for _, d := range st.Devices {
		for _, c := range d.Conditions {
			if !c.OK {
				title(w, "%s: %s (%s): %s\n", d.Name, c.Type, c.Reason, c.Message)
			}
		}
	}
}
