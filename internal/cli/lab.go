package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/lab"
)

func newLabCmd(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "A real EVPN fabric in network namespaces (FRR), deployed by a jobfabric server: up, status, ping, down (root)",
		Long: `The lab builds the switches of a small topology (nos: frr) as network namespaces
running FRR, and one namespace per server NIC. Point a server at it
(jobfabric server --fabric-driver lab --frr-targets RUN_DIR/targets.json) and its
deploys configure the lab: VRFs, ports and group-policy rules come from the
rendered device configurations, nothing else. See docs/lab.md.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "lab-dir", "", "state directory of the lab (env JOBFABRIC_LAB_DIR; default "+lab.DefaultDir+")")

	var topo string
	up := &cobra.Command{
		Use: "up", Short: "Build the lab from a topology file and start FRR on every switch", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lab.Check(); err != nil {
				return err
			}
			l, err := lab.Up(cmd.Context(), lab.Options{Topology: topo, Dir: dir, Log: g.stderr})
			if err != nil {
				return err
			}
			return g.emit(l, func(w io.Writer) {
				fmt.Fprintf(w, "lab %s is up: %d switches, %d endpoints, run directory %s\n", strings.TrimSuffix(l.Prefix, "-"), len(l.Devices), len(l.Endpoints), l.RunDir)
				fmt.Fprintf(w, "next: jobfabric server --fabric-driver lab --frr-targets %s\n", l.TargetsFile())
				fmt.Fprintf(w, "      jobfabric topology apply -f %s; jobfabric lab wait; jobfabric lab status\n", topo)
			})
		},
	}
	up.Flags().StringVarP(&topo, "topology", "f", "", "topology file (YAML or JSON; every switch nos: frr)")
	up.MarkFlagRequired("topology")

	var verbose bool
	status := &cobra.Command{
		Use: "status", Short: "Switches, BGP and EVPN sessions, L3VNIs and routes per VRF", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.Load(dir)
			if err != nil {
				return err
			}
			st := l.Status(cmd.Context())
			return g.emit(st, func(w io.Writer) { labStatusTable(w, l, st, verbose) })
		},
	}
	status.Flags().BoolVarP(&verbose, "routes", "r", false, "list every route of every VRF")

	var timeout time.Duration
	wait := &cobra.Command{
		Use: "wait", Short: "Wait until every uplink has its underlay and EVPN sessions up; on timeout print the switches' vtysh state", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.Load(dir)
			if err != nil {
				return err
			}
			if err := g.checkOutput(); err != nil {
				return err
			}
			start := g.clock()
			if err := l.WaitConverged(cmd.Context(), timeout); err != nil {
				return err
			}
			took := g.clock().Sub(start).Round(time.Millisecond)
			v := labResult{Lab: strings.TrimSuffix(l.Prefix, "-"), Converged: true, Seconds: took.Seconds()}
			return g.emit(v, func(w io.Writer) { fmt.Fprintf(w, "converged in %s\n", took) })
		},
	}
	wait.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait")

	var pingTimeout time.Duration
	ping := &cobra.Command{
		Use:   "ping SRC DST",
		Short: "Ping from one GPU endpoint to another (server/nic, e.g. s1-gpu001/nic0, or an address); exits 1 without a reply",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.Load(dir)
			if err != nil {
				return err
			}
			src, err := l.Endpoint(args[0])
			if err != nil {
				return err
			}
			dst := args[1]
			if e, err := l.Endpoint(args[1]); err == nil {
				dst = e.Addr4()
			}
			if err := g.checkOutput(); err != nil {
				return err
			}
			ok, out := l.Ping(cmd.Context(), src, dst, pingTimeout)
			v := labPing{From: src.Name(), To: dst, Reached: ok, Output: out}
			if err := g.emit(v, func(w io.Writer) { fmt.Fprintln(w, out) }); err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s (%s) does not reach %s", src.Name(), src.Addr4(), dst)
			}
			return nil
		},
	}
	ping.Flags().DurationVar(&pingTimeout, "timeout", time.Second, "how long to wait for the reply")

	down := &cobra.Command{
		Use: "down", Short: "Stop the lab's daemons (by PID) and delete its namespaces (by name) and run directory", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.Load(dir)
			if err != nil {
				return err
			}
			if err := g.checkOutput(); err != nil {
				return err
			}
			if err := l.Down(cmd.Context()); err != nil {
				return err
			}
			v := labResult{Lab: strings.TrimSuffix(l.Prefix, "-"), Down: true}
			return g.emit(v, func(w io.Writer) { fmt.Fprintf(w, "lab %s is down\n", v.Lab) })
		},
	}
	cmd.AddCommand(up, status, wait, ping, down)
	return cmd
}

// labResult is what lab wait and lab down print with -o json|yaml|name.
type labResult struct {
	Lab       string  `json:"lab"`
	Converged bool    `json:"converged,omitempty"`
	Seconds   float64 `json:"seconds,omitempty"`
	Down      bool    `json:"down,omitempty"`
}

func (r labResult) names() []string { return []string{"lab/" + r.Lab} }

type labPing struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Reached bool   `json:"reached"`
	Output  string `json:"output"`
}

func labStatusTable(w io.Writer, l *lab.Lab, st *lab.Status, routes bool) {
	title(w, "lab %s (run directory %s)\n", strings.TrimSuffix(st.Prefix, "-"), st.RunDir)
	header(w, "DEVICE", "ROLE", "DAEMONS", "UNDERLAY", "EVPN", "L3VNIS", "ROUTES PER VRF")
	for _, d := range st.Devices {
		daemons := "up"
		if !d.Daemons {
			daemons = "DOWN"
		}
		u, ut := d.Established("ipv4")
		e, et := d.Established("evpn")
		var vnis, vrfs []string
		for _, v := range d.VNIs {
			vnis = append(vnis, fmt.Sprintf("%s=%d", v.VRF, v.VNI))
		}
		for _, v := range d.VRFs {
			vrfs = append(vrfs, fmt.Sprintf("%s:%d", v.Name, len(v.Routes)))
		}
		row(w, d.Name, d.Role, daemons, fmt.Sprintf("%d/%d", u, ut), fmt.Sprintf("%d/%d", e, et), orDash(strings.Join(vnis, ",")), orDash(strings.Join(vrfs, " ")))
	}
	title(w, "\n")
	header(w, "DEVICE", "AF", "PEER", "STATE", "PREFIXES")
	for _, d := range st.Devices {
		for _, s := range d.Sessions {
			peer := s.Peer
			if s.Hostname != "" {
				peer += " (" + s.Hostname + ")"
			}
			row(w, d.Name, s.AF, peer, s.State, s.Prefixes)
		}
		if d.Error != "" {
			row(w, d.Name, "-", "-", "error: "+d.Error, "-")
		}
	}
	if routes {
		for _, d := range st.Devices {
			for _, v := range d.VRFs {
				fmt.Fprintf(w, "\n%s vrf %s\n", d.Name, v.Name)
				for _, r := range v.Routes {
					fmt.Fprintln(w, "  "+r)
				}
			}
		}
	}
	if _, err := os.Stat(l.TargetsFile()); err == nil {
		fmt.Fprintf(w, "\ndeploy targets: %s\n", l.TargetsFile())
	}
}
