package cli

import (
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
	"github.com/jobfabric/jobfabric/internal/state"
)

func newFabricCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "fabric", Short: "The network: device configs per revision, diffs, deploy, verify (admin)"}

	status := &cobra.Command{
		Use: "status", Short: "The latest revision and each device's deployed revision and last error", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var st state.FabricStatus
			if err := c.Do(cmd.Context(), "GET", "/v1/fabric/status", nil, &st); err != nil {
				return err
			}
			return g.emit(st, func(w io.Writer) { fabricStatusTable(w, &st) })
		},
	}

	revisions := &cobra.Command{
		Use: "revisions", Short: "The kept revisions: when, why, which devices changed", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var rs []state.RevisionInfo
			if err := c.Do(cmd.Context(), "GET", "/v1/fabric/revisions", nil, &rs); err != nil {
				return err
			}
			return g.emit(rs, func(w io.Writer) {
				row(w, "REV", "AT", "CHANGED", "REMOVED", "CAUSE")
				for _, r := range rs {
					row(w, r.Rev, r.At.UTC().Format("2006-01-02T15:04:05Z"), orDash(strings.Join(r.Changed, ",")), orDash(strings.Join(r.Removed, ",")), orDash(r.Cause))
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

	deployCmd := &cobra.Command{
		Use: "deploy", Short: "Compile and deploy now, retrying failed devices; exits non-zero if a device failed", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var st state.FabricStatus
			if err := c.Do(cmd.Context(), "POST", "/v1/fabric/deploy", nil, &st); err != nil {
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
	cmd.AddCommand(status, revisions, renderCmd, diff, deployCmd, verifyCmd)
	return cmd
}

func fabricStatusTable(w io.Writer, st *state.FabricStatus) {
	fmt.Fprintf(w, "latest revision: %d\n", st.Revision)
	row(w, "DEVICE", "ROLE", "NOS", "CHANGED-IN", "DEPLOYED", "STATE", "ERROR")
	for _, d := range st.Devices {
		s := "in sync"
		switch {
		case d.Error != "":
			s = "failed"
		case d.Deployed != d.DesiredHash:
			s = "pending"
		}
		row(w, d.Name, d.Role, d.NOS, d.DesiredRev, d.DeployedRev, s, orDash(d.Error))
	}
}
