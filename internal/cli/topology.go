package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/platform"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/topology/export"
)

func newTopologyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "topology", Short: "Generate, validate, apply and show the cluster inventory"}
	var o topology.GenerateOptions
	var format string
	gen := &cobra.Command{
		Use: "generate", Short: "Print a valid rail-optimized cluster (GPU i of each server -> leaf i of its stripe)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := topology.Generate(o)
			if err != nil {
				return err
			}
			if format == "json" || g.output == "json" {
				return g.emitAs("json", t)
			}
			return g.emitAs("yaml", t)
		},
	}
	f := gen.Flags()
	f.IntVar(&o.Stripes, "stripes", 1, "number of stripes")
	f.IntVar(&o.ServersPerStripe, "servers-per-stripe", 4, "servers in each stripe")
	f.IntVar(&o.GPUsPerServer, "gpus-per-server", 8, "GPUs (and rails, NICs) per server")
	f.StringVar(&o.GPUModel, "gpu-model", "H100-80GB", "GPU model ("+strings.Join(domain.GPUModelNames(), ", ")+")")
	f.IntVar(&o.Spines, "spines", 0, "number of spines (per pod with --super-spines; default 2)")
	f.IntVar(&o.SuperSpines, "super-spines", 0, "super-spines: a three-tier fabric of --pods pods joined by them (default 0: two tiers)")
	f.IntVar(&o.Pods, "pods", 0, "pods of a three-tier fabric; the stripes are split evenly among them (default 1)")
	f.IntVar(&o.NVLinkDomainSize, "nvlink-domain-size", 0, "GPUs per NVLink domain (default: one server; 72 for NVL72)")
	f.StringVar(&o.Site, "site", "", "site name (default dc1)")
	f.StringVar(&o.Fabric, "fabric", "", "fabric name (default fabric1)")
	f.StringVar(&o.NOS, "nos", "", "network OS of the switches: "+strings.Join(platform.NOSes(), ", ")+" (default frr)")
	f.StringVar(&o.Platform, "platform", "", "switch model, vendor/model (default: the NOS's default; known: "+strings.Join(platform.ModelNames(""), ", ")+")")
	f.StringVar(&o.Version, "nos-version", "", "NOS release of the switches (default: the default platform's release)")
	f.StringVar(&format, "format", "yaml", "yaml or json")

	validate := &cobra.Command{
		Use: "validate -f FILE", Short: "Check a topology file without applying it", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			file, _ := cmd.Flags().GetString("file")
			t, _, err := loadTopologyFile(file)
			if err != nil {
				return err
			}
			v := topologyValid{File: file, Valid: true, Summary: t.Summary()}
			return g.emit(v, func(w io.Writer) {
				s := v.Summary
				fmt.Fprintf(w, "%s is valid: %d servers, %d GPUs, %d leaves, %d spines%s, %d cables\n", file, s.Servers, s.GPUs, s.Leaves, s.Spines, superSpines(s), s.Cables)
			})
		},
	}
	validate.Flags().StringP("file", "f", "", "topology file (YAML or JSON; - for stdin)")
	_ = validate.MarkFlagRequired("file")

	var dry bool
	apply := &cobra.Command{
		Use: "apply -f FILE", Short: "Apply a topology: all or nothing; the same file again changes nothing (admin)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			file, _ := cmd.Flags().GetString("file")
			_, raw, err := loadTopologyFile(file)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.ApplyTopology(cmd.Context(), raw, dry)
			if err != nil {
				return inFile(file, err)
			}
			return g.emit(res, func(w io.Writer) {
				verb := "applied"
				switch {
				case dry && res.Changed:
					verb = "would change the inventory (dry run)"
				case dry:
					verb = "is already applied (dry run)"
				case !res.Changed:
					verb = "unchanged (same topology already applied)"
				}
				s := res.Summary
				fmt.Fprintf(w, "topology %s: revision %d, %d servers, %d GPUs, %d leaves, %d spines\n", verb, res.Revision, s.Servers, s.GPUs, s.Leaves, s.Spines)
			})
		},
	}
	apply.Flags().StringP("file", "f", "", "topology file (YAML or JSON; - for stdin)")
	apply.Flags().BoolVar(&dry, "dry-run", false, "validate on the server and report without applying")
	_ = apply.MarkFlagRequired("file")

	show := &cobra.Command{
		Use: "show", Short: "Show servers, GPUs, leaves, spines, rails and NVLink domains (admin)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			v, err := c.Topology(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(v, func(w io.Writer) { topologyTable(w, v) })
		},
	}
	cmd.AddCommand(gen, validate, apply, show, newTopologyExportCmd(g))
	return cmd
}

// newTopologyExportCmd is `jobfabric topology export`: the applied topology
// (or a file's) in another scheduler's terms.
func newTopologyExportCmd(g *globals) *cobra.Command {
	var format, file, name string
	cmd := &cobra.Command{
		Use:   "export --format kueue|volcano|slurm|node-labels",
		Short: "Write the topology for another scheduler: Kueue Topology + Node labels, Volcano HyperNodes, Slurm topology.conf (admin)",
		Long: `Write the network hierarchy jobfabric places by in another scheduler's terms,
from the applied topology (admin) or, with --file, from a topology file (no
server). Levels, top to bottom: fabric (its spines), leaf group (the leaves a
server is cabled to: on a rail-optimized fabric, its stripe), NVLink domain
(only when one spans several servers), server.

  kueue        a Kueue Topology (kueue.x-k8s.io/v1beta2) and one Node per server
               carrying its labels, for kubectl apply --server-side
  node-labels  the same labels as kubectl label commands (never creates a Node)
  volcano      Volcano HyperNodes (topology.volcano.sh/v1alpha1), tier 1 lowest
  slurm        topology.conf for TopologyPlugin=topology/tree`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var t *domain.Topology
			if file != "" {
				ft, _, err := loadTopologyFile(file)
				if err != nil {
					return err
				}
				t = ft
			} else {
				c, err := g.client()
				if err != nil {
					return err
				}
				v, err := c.Topology(cmd.Context())
				if err != nil {
					return err
				}
				if v.Topology == nil || len(v.Topology.Sites) == 0 {
					return domain.Errorf(domain.CodeFailedPrecondition, "no topology is applied: apply one, or export a file with --file")
				}
				t = v.Topology
			}
			out, err := export.Render(t, format, export.Options{Name: name})
			if err != nil {
				return err
			}
			_, err = g.stdout.Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "output format: "+strings.Join(export.Formats(), ", "))
	cmd.Flags().StringVarP(&file, "file", "f", "", "export this topology file instead of the applied topology (no server)")
	cmd.Flags().StringVar(&name, "name", "jobfabric", "name of the Kueue Topology object")
	_ = cmd.MarkFlagRequired("format")
	return cmd
}

// topologyValid is what topology validate prints with -o json|yaml (an
// invalid file is an error, on stderr).
type topologyValid struct {
	File    string                 `json:"file"`
	Valid   bool                   `json:"valid"`
	Summary domain.TopologySummary `json:"summary"`
}

func (g *globals) emitAs(format string, v any) error {
	saved := g.output
	g.output = format
	defer func() { g.output = saved }()
	return g.emit(v, nil)
}

// loadTopologyFile reads and checks a topology file locally, so errors name
// the file before anything is sent.
func loadTopologyFile(file string) (*domain.Topology, []byte, error) {
	if file == "" {
		return nil, nil, domain.Invalid("file", "a topology file is required (-f FILE)")
	}
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(os.Stdin)
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, nil, domain.Invalid("file", "cannot read %s: %v", file, err)
	}
	t, err := topology.Parse(raw)
	if err != nil {
		return nil, nil, inFile(file, err)
	}
	if err := topology.Normalize(t, nil); err != nil {
		return nil, nil, inFile(file, err)
	}
	if derr := topology.Validate(t); derr != nil {
		return nil, nil, inFile(file, derr)
	}
	return t, raw, nil
}

// inFile prefixes an error's message with the file it is about.
func inFile(file string, err error) error {
	var de *domain.Error
	if !errors.As(err, &de) {
		return fmt.Errorf("%s: %w", file, err)
	}
	cp := *de
	cp.Message = file + ": " + de.Message
	return &cp
}

func topologyTable(w io.Writer, v *domain.TopologyView) {
	s := v.Summary
	models := make([]string, 0, len(s.GPUsByModel))
	for m, n := range s.GPUsByModel {
		models = append(models, fmt.Sprintf("%d x %s", n, m))
	}
	sort.Strings(models)
	title(w, "Revision %d: %d sites, %d fabrics, %d spines, %d leaves, %d servers, %d GPUs (%s), %d stripes, %d rails, %d NVLink domains\n\n",
		v.Revision, s.Sites, s.Fabrics, s.Spines, s.Leaves, s.Servers, s.GPUs, strings.Join(models, ", "), s.Stripes, s.Rails, s.NVLinkDomains)
	header(w, "SWITCH", "ROLE", "FABRIC", "STRIPE", "RAIL", "ASN", "LOOPBACK", "PORTS")
	for _, site := range v.Topology.Sites {
		for _, f := range site.Fabrics {
			for _, sw := range f.SuperSpines {
				row(w, sw.Name, "super-spine", site.Name+"/"+f.Name, "-", "-", sw.ASN, sw.Loopback, sw.PortCount)
			}
			for _, sw := range f.Spines {
				role := "spine"
				if sw.Pod != nil {
					role = fmt.Sprintf("spine (pod %d)", *sw.Pod)
				}
				row(w, sw.Name, role, site.Name+"/"+f.Name, "-", "-", sw.ASN, sw.Loopback, sw.PortCount)
			}
			for _, sw := range f.Leaves {
				row(w, sw.Name, "leaf", site.Name+"/"+f.Name, optInt(sw.Stripe), optInt(sw.Rail), sw.ASN, sw.Loopback, sw.PortCount)
			}
		}
	}
	title(w, "\n")
	header(w, "SERVER", "STRIPE", "GPUS", "MODEL", "NVLINK-DOMAIN", "NICS", "DRIVER")
	for _, site := range v.Topology.Sites {
		for _, f := range site.Fabrics {
			for _, srv := range f.Servers {
				row(w, srv.Name, srv.Stripe, srv.GPUs, srv.GPUModel, orDash(srv.NVLinkDomain), len(srv.NICs), orDash(srv.Driver))
			}
		}
	}
}

// superSpines describes the third tier of a summary, if any.
func superSpines(s domain.TopologySummary) string {
	if s.SuperSpines == 0 {
		return ""
	}
	return fmt.Sprintf(", %d super-spines in %d pods", s.SuperSpines, s.Pods)
}

func optInt(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}
