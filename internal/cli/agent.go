package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/agent"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

// execRunner runs the discovery commands on the host, each with a timeout
// (nvidia-smi can hang on a GPU that fell off the bus).
type execRunner struct{ timeout time.Duration }

func (r execRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 200 {
			msg = msg[:200]
		}
		if msg != "" {
			return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
		}
		return nil, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out, nil
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// collector builds the discoverer: the host's commands and file system, or
// a fixture directory's recorded outputs.
func collector(fixture string, cmdTimeout time.Duration) (*hostfacts.Collector, error) {
	host, _ := os.Hostname()
	if fixture == "" {
		return &hostfacts.Collector{Run: execRunner{cmdTimeout}, FS: os.DirFS("/"), Hostname: host}, nil
	}
	st, err := os.Stat(fixture)
	if err != nil || !st.IsDir() {
		return nil, domain.Invalid("fixture", "fixture %q is not a directory of recorded outputs", fixture)
	}
	dir := os.DirFS(fixture)
	return &hostfacts.Collector{Run: hostfacts.FileRunner{FS: dir}, FS: dir, Hostname: host}, nil
}

func newAgentCmd(g *globals) *cobra.Command {
	var node, fixture, label string
	var interval, rediscover, cmdTimeout time.Duration
	var once bool
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: report this GPU server's facts and heartbeats (token from JOBFABRIC_TOKEN)",
		Long: `Run the node agent on a GPU server. It discovers the GPUs (nvidia-smi -q -x,
-L, mig -lgi), the PCIe and NVLink topology (nvidia-smi topo -m, nvlink --status)
and the RDMA ports (/sys/class/infiniband, or ibstat), reports them when they
change, and sends heartbeats. Use a node agent's token:

  jobfabric token create --role runtime --node gpu-a1

With --fixture DIR the agent reads recorded outputs instead of running
commands: ` + fixtureHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				return domain.Invalid("node", "--node NAME is required: the server's name in the inventory")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			col, err := collector(fixture, cmdTimeout)
			if err != nil {
				return err
			}
			if label == "" {
				label = "jobfabric-agent " + col.Hostname
			}
			a, err := agent.New(agent.Config{Node: node, Agent: label, Discover: col, Report: c, Clock: systemClock{},
				Logger: slog.New(slog.NewTextHandler(g.stderr, nil)), Interval: interval, Rediscover: rediscover})
			if err != nil {
				return err
			}
			if once {
				if err := a.Once(cmd.Context()); err != nil {
					return err
				}
				h, err := c.Host(cmd.Context(), node)
				if err != nil {
					return err
				}
				return g.emit(h, func(w io.Writer) { g.hostTable(w, []domain.HostStatus{*h}) })
			}
			err = a.Run(cmd.Context())
			if cmd.Context().Err() != nil {
				return nil // stopped by a signal
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&node, "node", "", "this server's name in the inventory")
	f.StringVar(&fixture, "fixture", "", "read recorded outputs from this directory instead of running commands (tests, demos)")
	f.StringVar(&label, "agent-name", "", "how the agent names itself in reports (default: jobfabric-agent HOSTNAME)")
	f.DurationVar(&interval, "interval", 0, "heartbeat interval (default: a third of the server's heartbeat timeout)")
	f.DurationVar(&rediscover, "rediscover", agent.DefaultRediscover, "how often the facts are discovered again")
	f.DurationVar(&cmdTimeout, "command-timeout", 30*time.Second, "timeout of each discovery command")
	f.BoolVar(&once, "once", false, "run one cycle (discover, report, beat), print the node's record and exit")

	facts := &cobra.Command{
		Use: "facts", Short: "Discover and print this server's facts without talking to a server", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			col, err := collector(fixture, cmdTimeout)
			if err != nil {
				return err
			}
			hf, err := col.Collect(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(hf, func(w io.Writer) { factsTable(w, hf) })
		},
	}
	facts.Flags().StringVar(&fixture, "fixture", "", "read recorded outputs from this directory instead of running commands")
	facts.Flags().DurationVar(&cmdTimeout, "command-timeout", 30*time.Second, "timeout of each discovery command")
	cmd.AddCommand(facts)
	return cmd
}

func fixtureHelp() string {
	m := hostfacts.FixtureFiles()
	var lines []string
	for c, f := range m {
		lines = append(lines, fmt.Sprintf("  %-28s %s", c, f))
	}
	sort.Strings(lines)
	return "the directory holds one file per command,\n\n" + strings.Join(lines, "\n") +
		"\n\nand sys/class/infiniband/... and proc/driver/nvidia-caps/mig-minors as on a host."
}

// factsTable prints discovered facts in sections: a summary, the GPUs,
// the RDMA ports and what could not be read.
func factsTable(w io.Writer, f *domain.HostFacts) {
	title(w, "driver %s, CUDA %s, %d GPUs, %d RDMA ports\n", orDash(f.Driver), orDash(f.CUDA), len(f.GPUs), len(f.NICs))
	factsSections(w, f)
}

func factsSections(w io.Writer, f *domain.HostFacts) {
	title(w, "\nGPUs:\n")
	header(w, "  GPU", "UUID", "MODEL", "BUS", "NUMA", "CPUS", "MIG")
	for _, g := range f.GPUs {
		mig := orDash(g.MIGMode)
		if len(g.MIG) > 0 {
			mig = fmt.Sprintf("%s (%d devices)", g.MIGMode, len(g.MIG))
		}
		row(w, fmt.Sprintf("  %d", g.Index), g.UUID, orDash(g.Model), g.PCIBusID, g.NUMA, orDash(g.CPUs), mig)
	}
	title(w, "\nRDMA ports:\n")
	header(w, "  NIC", "PORT", "NETDEV", "LINK", "STATE", "RATE", "GPU")
	for _, n := range f.NICs {
		gpu := "-"
		if n.GPU >= 0 {
			gpu = fmt.Sprintf("%d (%s)", n.GPU, n.Path)
		}
		row(w, "  "+n.RDMADevice, n.Port, orDash(n.Netdev), orDash(n.LinkLayer), orDash(n.State), n.RateGbps, gpu)
	}
	if len(f.Problems) > 0 {
		title(w, "\nProblems:\n")
		for _, p := range f.Problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
	}
}

// hostTable lists node agents' records; HEARTBEAT is how long ago the
// leader last heard the agent. -o wide adds the agent, when its facts were
// last reported and the heartbeat's time.
func (p *printing) hostTable(w io.Writer, hs []domain.HostStatus) {
	header(w, wideCols(w, []any{"NODE", "DRIVER", "GPUS", "NICS", "HEARTBEAT", "CONDITIONS"}, "AGENT", "REPORTED", "LAST-HEARTBEAT")...)
	for _, h := range hs {
		driver, gpus, nics := "-", 0, 0
		if h.Facts != nil {
			driver, gpus, nics = orDash(h.Facts.Driver), len(h.Facts.GPUs), len(h.Facts.NICs)
		}
		hb := "-"
		if h.LastHeartbeat != nil {
			hb = p.age(*h.LastHeartbeat) + " ago"
		}
		var conds []string
		for _, c := range h.Conditions {
			s := c.Type
			if c.Cordons {
				s += "(cordons)"
			}
			conds = append(conds, s)
		}
		row(w, wideCols(w, []any{h.Node, driver, gpus, nics, hb, orDash(strings.Join(conds, ","))}, orDash(h.Agent), p.when(h.ReportedAt), p.whenPtr(h.LastHeartbeat))...)
	}
}

// hostDetail is host show: the record, then a table per section:
// conditions, GPUs (with the accepted baseline), RDMA ports, problems.
func (p *printing) hostDetail(w io.Writer, h *domain.HostStatus) {
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return p.when(t) + " (" + p.age(t) + " ago)"
	}
	row(w, "Node:", h.Node)
	row(w, "Agent:", orDash(h.Agent))
	if f := h.Facts; f != nil {
		row(w, "Driver:", orDash(f.Driver))
		row(w, "CUDA:", orDash(f.CUDA))
		if f.NVLinkCluster != "" {
			row(w, "NVLink cluster:", f.NVLinkCluster)
		}
		row(w, "Sources:", orDash(strings.Join(f.Sources, ", ")))
	}
	row(w, "First seen:", ago(h.FirstSeen))
	row(w, "Facts reported:", ago(h.ReportedAt))
	hb := "never"
	if h.LastHeartbeat != nil {
		hb = ago(*h.LastHeartbeat)
	}
	row(w, "Last heartbeat:", hb)
	if h.CordonedForDrift {
		row(w, "Cordoned:", "by the control plane, for drift")
	}
	if h.UnhealthyForHeartbeat {
		row(w, "Unhealthy:", "by the control plane, no heartbeat")
	}

	title(w, "\nConditions:\n")
	if len(h.Conditions) == 0 {
		title(w, "  none\n")
	} else {
		header(w, "  TYPE", "SINCE", "AGE", "CORDONS", "MESSAGE")
		for _, c := range h.Conditions {
			row(w, "  "+c.Type, p.when(c.Since), p.age(c.Since), c.Cordons, c.Message)
		}
	}
	if len(h.Baseline) > 0 {
		title(w, "\nGPU baseline (accepted):\n")
		header(w, "  GPU", "UUID", "BUS")
		for _, b := range h.Baseline {
			row(w, fmt.Sprintf("  %d", b.Index), b.UUID, orDash(b.PCIBusID))
		}
	}
	if h.Facts != nil {
		factsSections(w, h.Facts)
	}
}

func newHostCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "host", Short: "Node agents' facts, drift and heartbeats; the host policy"}
	var watch bool
	list := &cobra.Command{
		Use: "list", Short: "Every node agent's record", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if watch {
				key := func(h domain.HostStatus) string { return h.Node }
				return watchList(cmd.Context(), g, c.Hosts, key, sameHost, g.hostTable)
			}
			hs, err := c.Hosts(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(hs, func(w io.Writer) { g.hostTable(w, hs) })
		},
	}
	addWatchFlag(list, &watch, "each node whose record changes (facts, conditions; not each heartbeat)")
	show := &cobra.Command{
		Use: "show NODE", Short: "A node's facts, GPU baseline and conditions", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			h, err := c.Host(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.emit(h, func(w io.Writer) { g.hostDetail(w, h) })
		},
	}
	accept := &cobra.Command{
		Use: "accept NODE", Short: "Accept the node's reported GPUs as its baseline (after replacing a GPU)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			h, err := c.AcceptHost(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.emit(h, func(w io.Writer) { g.hostTable(w, []domain.HostStatus{*h}) })
		},
	}
	var timeout time.Duration
	var cordonOn, minDrivers []string
	policy := &cobra.Command{
		Use: "policy", Short: "Show or change the host policy: heartbeat timeout, drift that cordons, tenants' minimum drivers", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.HostPolicy(cmd.Context())
			if err != nil {
				return err
			}
			fl := cmd.Flags()
			if fl.Changed("heartbeat-timeout") || fl.Changed("cordon-on") || fl.Changed("tenant-min-driver") {
				if fl.Changed("heartbeat-timeout") {
					p.HeartbeatTimeoutSeconds = int64(timeout / time.Second)
				}
				if fl.Changed("cordon-on") {
					p.CordonOn = []string{}
					for _, k := range cordonOn {
						if k != "" && k != "none" {
							p.CordonOn = append(p.CordonOn, k)
						}
					}
				}
				if fl.Changed("tenant-min-driver") {
					if p.TenantMinDriver == nil {
						p.TenantMinDriver = map[string]string{}
					}
					for _, kv := range minDrivers {
						t, v, ok := strings.Cut(kv, "=")
						if !ok {
							return domain.Invalid("tenant-min-driver", "%q is not TENANT=VERSION (TENANT= removes it)", kv)
						}
						if v == "" {
							delete(p.TenantMinDriver, t)
						} else {
							p.TenantMinDriver[t] = v
						}
					}
				}
				if p, err = c.SetHostPolicy(cmd.Context(), *p); err != nil {
					return err
				}
			}
			return g.emit(p, func(w io.Writer) {
				fmt.Fprintf(w, "heartbeat timeout: %s\n", p.HeartbeatTimeout())
				fmt.Fprintf(w, "drift that cordons: %s\n", orDash(strings.Join(p.CordonOn, ",")))
				fmt.Fprintf(w, "recorded only: %s\n", orDash(strings.Join(recordedOnly(p), ",")))
				var ts []string
				for t, v := range p.TenantMinDriver {
					ts = append(ts, t+"="+v)
				}
				sort.Strings(ts)
				fmt.Fprintf(w, "tenant minimum drivers: %s\n", orDash(strings.Join(ts, ",")))
			})
		},
	}
	pf := policy.Flags()
	pf.DurationVar(&timeout, "heartbeat-timeout", domain.DefaultHeartbeatTimeout, "a node not heard for this long is marked unhealthy")
	pf.StringSliceVar(&cordonOn, "cordon-on", nil, "drift kinds that cordon a node ("+strings.Join(domain.DriftKinds, ", ")+"; none for no cordon)")
	pf.StringSliceVar(&minDrivers, "tenant-min-driver", nil, "TENANT=VERSION: the lowest driver the tenant's jobs accept (TENANT= removes it)")
	cmd.AddCommand(list, show, accept, policy)
	return cmd
}

// sameHost: two versions of a node's record differ for a watcher when
// more than the heartbeat's time changed.
func sameHost(a, b domain.HostStatus) bool {
	a.LastHeartbeat, b.LastHeartbeat = nil, nil
	return equalItems(a, b, nil)
}

func recordedOnly(p *domain.HostPolicy) []string {
	var out []string
	for _, k := range domain.DriftKinds {
		if !p.Cordons(k) {
			out = append(out, k)
		}
	}
	return out
}
