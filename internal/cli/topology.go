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
	f.IntVar(&o.Spines, "spines", 0, "number of spines (default 2)")
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
				fmt.Fprintf(w, "%s is valid: %d servers, %d GPUs, %d leaves, %d spines, %d cables\n", file, s.Servers, s.GPUs, s.Leaves, s.Spines, s.Cables)
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
	cmd.AddCommand(gen, validate, apply, show)
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
			for _, sw := range f.Spines {
				row(w, sw.Name, "spine", site.Name+"/"+f.Name, "-", "-", sw.ASN, sw.Loopback, sw.PortCount)
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

func optInt(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}
