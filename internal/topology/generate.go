package topology

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/platform"
)

// GenerateOptions describes a rail-optimized cluster to generate. Zero values
// take the defaults below, so GenerateOptions{} is a small valid cluster.
type GenerateOptions struct {
	Site             string // site name; default "dc1"
	Fabric           string // fabric name; default "fabric1"
	Stripes          int    // 1..1000; default 1
	ServersPerStripe int    // 1..1024 (minus spines: one leaf port each); default 4
	GPUsPerServer    int    // 1..64, also NICs, rails and leaves per stripe; default 8
	GPUModel         string // a domain GPU model; default "H100-80GB"
	Spines           int    // 1..128 (per pod in a three-tier fabric); default 2
	// SuperSpines > 0 generates a three-tier fabric: the stripes are split
	// evenly into Pods pods, each with its own Spines spines, and every
	// spine is uplinked to every super-spine. 0 (default) is two-tier.
	SuperSpines int // 0..128
	Pods        int // 1..250, and stripes a multiple of it; default 1
	// NVLinkDomainSize is the GPUs of one NVLink domain: a multiple of
	// GPUsPerServer (72 with 4 GPUs per server = 18 servers, an NVL72).
	// Domains do not cross stripes. Default: one domain per server.
	NVLinkDomainSize int
	Driver           string // NVIDIA driver version; default "535.183.01"
	NOS              string // switch network OS; default "frr"
	// Platform is the switch model, "vendor/model" (e.g.
	// cisco/N9K-C9364D-GX2A); default: the NOS's default platform. Version
	// is its NOS release; default: that platform's default release. Ports
	// are named as the model names them.
	Platform string
	Version  string
}

// Defaults of GenerateOptions.
const (
	DefaultSite             = "dc1"
	DefaultFabric           = "fabric1"
	DefaultStripes          = 1
	DefaultServersPerStripe = 4
	DefaultGPUsPerServer    = 8
	DefaultGPUModel         = "H100-80GB"
	DefaultSpines           = 2
	DefaultDriver           = "535.183.01"
	DefaultNOS              = "frr"
)

// Address plan of generated clusters: loopbacks in 10.254.0.0/16 (spines in
// 10.254.0.x, leaves from 10.254.1.1; in a three-tier fabric super-spines in
// 10.252.0.x and pod p's spines in 10.252.p.x), server links from 10.0.0.0/12 (or
// wider when needed) and fd00:0:0:1::/64. The ranges do not overlap.
const (
	genPool6 = "fd00:0:0:1::/64"
	// A spine ASN shared by all spines is the usual eBGP Clos design: spines
	// never peer with each other, and leaves see one upstream AS.
	genSpineASN2 = 65000
	genSpineASN4 = 4200000000 // RFC 6996 private 4-byte range
	// genMax2ByteLeaves keeps leaf ASNs 65001.. inside the private 2-byte
	// range, which ends at 65534.
	genMax2ByteLeaves = 65534 - genSpineASN2
	// maxGenLeaves is what the leaf loopbacks 10.254.1.1.. hold (250 a /24).
	maxGenLeaves = 250 * 253
)

func (o GenerateOptions) withDefaults() (GenerateOptions, error) {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	defInt := func(n *int, d int) {
		if *n == 0 {
			*n = d
		}
	}
	def(&o.Site, DefaultSite)
	def(&o.Fabric, DefaultFabric)
	def(&o.GPUModel, DefaultGPUModel)
	def(&o.Driver, DefaultDriver)
	def(&o.NOS, DefaultNOS)
	defInt(&o.Stripes, DefaultStripes)
	defInt(&o.ServersPerStripe, DefaultServersPerStripe)
	defInt(&o.GPUsPerServer, DefaultGPUsPerServer)
	defInt(&o.Spines, DefaultSpines)
	defInt(&o.Pods, 1)
	defInt(&o.NVLinkDomainSize, o.GPUsPerServer)

	if e := domain.ValidateName("site", o.Site); e != nil {
		return o, e
	}
	if e := domain.ValidateName("fabric", o.Fabric); e != nil {
		return o, e
	}
	if _, ok := domain.LookupGPUModel(o.GPUModel); !ok {
		return o, domain.Invalid("gpu-model", "GPU model %q is not known; known models: %s", o.GPUModel, strings.Join(domain.GPUModelNames(), ", "))
	}
	if !slices.Contains(knownNOS, o.NOS) {
		return o, domain.Invalid("nos", "nos %q is not known; known: %s", o.NOS, strings.Join(knownNOS, ", "))
	}
	if o.Platform == "" {
		d, _ := platform.DefaultFor(o.NOS)
		o.Platform = d.Vendor + "/" + d.Model
		if o.Version == "" {
			o.Version = d.Version
		}
	}
	vendor, model, _ := strings.Cut(o.Platform, "/")
	m, ok := platform.Lookup(vendor, model)
	if !ok {
		return o, domain.Invalid("platform", "platform %q is not known; known: %s", o.Platform, strings.Join(platform.ModelNames(""), ", "))
	}
	if !m.Runs(o.NOS) {
		return o, domain.Invalid("platform", "platform %s/%s runs %s, not %s; platforms running %s: %s",
			m.Vendor, m.Name, strings.Join(m.NOSes, ", "), o.NOS, o.NOS, strings.Join(platform.ModelNames(o.NOS), ", "))
	}
	o.Platform = m.Vendor + "/" + m.Name
	if o.Version == "" && !m.Generic() {
		return o, domain.Invalid("nos-version", "platform %s needs the %s release it runs", o.Platform, o.NOS)
	}
	if o.Version != "" {
		if _, err := platform.ParseVersion(o.NOS, o.Version); err != nil {
			return o, domain.Invalid("nos-version", "nos-version %v", err)
		}
	}
	if len(o.Driver) > 64 || strings.ContainsAny(o.Driver, " \t\r\n") {
		return o, domain.Invalid("driver", "driver %q must be a version such as %s", o.Driver, DefaultDriver)
	}
	for _, r := range []struct {
		field  string
		v, max int
	}{
		{"stripes", o.Stripes, 1000},
		{"servers-per-stripe", o.ServersPerStripe, maxPorts},
		{"gpus-per-server", o.GPUsPerServer, 64},
		{"spines", o.Spines, 128},
		{"pods", o.Pods, 250},
		{"nvlink-domain-size", o.NVLinkDomainSize, o.GPUsPerServer * o.ServersPerStripe},
	} {
		if e := domain.ValidateRange(r.field, int64(r.v), 1, int64(r.max)); e != nil {
			return o, e
		}
	}
	if n := o.ServersPerStripe + o.Spines; n > maxPorts {
		return o, domain.Invalid("servers-per-stripe", "a leaf needs %d ports (%d servers + %d spine uplinks); a switch has at most %d",
			n, o.ServersPerStripe, o.Spines, maxPorts)
	}
	if e := domain.ValidateRange("super-spines", int64(o.SuperSpines), 0, 128); e != nil {
		return o, e
	}
	if o.SuperSpines == 0 && o.Pods > 1 {
		return o, domain.Invalid("pods", "%d pods need super-spines to join them (--super-spines); a two-tier fabric is one pod", o.Pods)
	}
	if o.Stripes%o.Pods != 0 {
		return o, domain.Invalid("stripes", "%d stripes do not split evenly into %d pods; use a multiple of %d", o.Stripes, o.Pods, o.Pods)
	}
	// Every leaf of a pod connects to every spine of the pod (and, in a
	// three-tier fabric, every spine to every super-spine), so a pod's
	// leaves must fit a spine and the pods' spines a super-spine.
	podLeaves := o.Stripes / o.Pods * o.GPUsPerServer
	spinePorts := podLeaves + o.SuperSpines
	if spinePorts > maxPorts {
		if o.SuperSpines == 0 {
			return o, domain.Invalid("stripes", "%d stripes x %d rails = %d leaves, but a spine has at most %d ports (one per leaf); use fewer stripes, or a three-tier fabric (super-spines and pods)",
				o.Stripes, o.GPUsPerServer, podLeaves, maxPorts)
		}
		return o, domain.Invalid("pods", "a pod of %d stripes x %d rails = %d leaves, plus %d super-spine uplinks, needs %d spine ports, but a spine has at most %d; use more pods",
			o.Stripes/o.Pods, o.GPUsPerServer, podLeaves, o.SuperSpines, spinePorts, maxPorts)
	}
	if need := o.Pods * o.Spines; o.SuperSpines > 0 && need > maxPorts {
		return o, domain.Invalid("pods", "%d pods x %d spines = %d super-spine ports, but a switch has at most %d", o.Pods, o.Spines, need, maxPorts)
	}
	if nLeaves := o.Stripes * o.GPUsPerServer; nLeaves > maxGenLeaves {
		return o, domain.Invalid("stripes", "%d stripes x %d rails = %d leaves; generated loopbacks hold at most %d", o.Stripes, o.GPUsPerServer, nLeaves, maxGenLeaves)
	}
	if n := m.Ports(); n > 0 {
		if need := o.ServersPerStripe + o.Spines; need > n {
			return o, domain.Invalid("servers-per-stripe", "a leaf needs %d ports (%d servers + %d spine uplinks), but %s has %d", need, o.ServersPerStripe, o.Spines, o.Platform, n)
		}
		if spinePorts > n {
			return o, domain.Invalid("stripes", "%d stripes x %d rails = %d leaves per pod (+%d super-spine uplinks), but a spine (%s) has %d ports", o.Stripes/o.Pods, o.GPUsPerServer, podLeaves, o.SuperSpines, o.Platform, n)
		}
		if need := o.Pods * o.Spines; o.SuperSpines > 0 && need > n {
			return o, domain.Invalid("pods", "%d pods x %d spines = %d super-spine ports, but %s has %d", o.Pods, o.Spines, need, o.Platform, n)
		}
	}
	if o.NVLinkDomainSize%o.GPUsPerServer != 0 {
		return o, domain.Invalid("nvlink-domain-size", "an NVLink domain of %d GPUs is not a whole number of %d-GPU servers", o.NVLinkDomainSize, o.GPUsPerServer)
	}
	if spd := o.NVLinkDomainSize / o.GPUsPerServer; o.ServersPerStripe%spd != 0 {
		return o, domain.Invalid("nvlink-domain-size", "an NVLink domain of %d GPUs spans %d servers; servers-per-stripe (%d) must be a multiple of %d because domains do not cross stripes",
			o.NVLinkDomainSize, spd, o.ServersPerStripe, spd)
	}
	return o, nil
}

// Generate builds a valid rail-optimized cluster: in each stripe s, NIC i of
// server k is cabled to port k of leaf "s<s>-leaf<i>" (rail i); every leaf is
// uplinked to every spine on the ports after the server ports, and spine port
// n goes to the n-th leaf. Link addresses are filled (Normalize), so the
// output is the explicit file an operator would apply. Options out of range
// return an invalid_argument *domain.Error naming the option.
//
// With SuperSpines, the fabric is three-tier: pod p holds stripes
// (p-1)*S/P+1..p*S/P and spines "p<p>-spine<j>"; a leaf is uplinked to the
// spines of its pod, spine port n to the pod's n-th leaf, and every spine
// to every super-spine "super<k>" on the ports after its leaf ports
// (super-spine port n goes to the n-th spine, pod by pod). The ASN plan is
// RFC 7938's: one ASN for the super-spines, one per pod for its spines
// (routes never cross a pod's spines twice), one per leaf.
func Generate(o GenerateOptions) (*domain.Topology, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	g, s, spines, pods := o.GPUsPerServer, o.ServersPerStripe, o.Spines, o.Pods
	three := o.SuperSpines > 0
	nLeaves := o.Stripes * g
	podLeaves := nLeaves / pods
	nServers := o.Stripes * s
	nCables := nServers * g

	// Two-tier: spines 65000, leaves 65001..; three-tier: super-spines
	// 65000, pod p's spines 65000+p, leaves after the pods.
	firstLeaf := uint32(1)
	if three {
		firstLeaf = uint32(pods) + 1
	}
	baseASN := uint32(genSpineASN2)
	if nLeaves+int(firstLeaf)-1 > genMax2ByteLeaves {
		baseASN = genSpineASN4
	}
	// A /12 leaves room to grow; widen only when the cables would not fit.
	poolBits := 12
	for poolBits > 9 && nCables > 1<<(linkBits4-poolBits) {
		poolBits--
	}

	vendor, model, _ := strings.Cut(o.Platform, "/")
	m, _ := platform.Lookup(vendor, model)
	ports := platform.NewPorts(m, o.NOS, DefaultPortPrefix, 0)
	portName := func(n int) string { return ports.Name(platform.Port{N: n}) }
	plat := func() *domain.Platform { return &domain.Platform{Vendor: m.Vendor, Model: m.Name, Version: o.Version} }
	radix := switchRadix
	if !m.Generic() {
		radix = func(int) int { return m.Ports() }
	}

	f := domain.Fabric{
		Name:          o.Fabric,
		RailOptimized: true,
		LinkPools:     domain.LinkPools{IPv4: "10.0.0.0/" + strconv.Itoa(poolBits), IPv6: genPool6},
		Spines:        make([]domain.Switch, 0, spines*pods),
		Leaves:        make([]domain.Switch, 0, nLeaves),
		Servers:       make([]domain.Server, 0, nServers),
		Cables:        make([]domain.Cable, 0, nCables),
		Uplinks:       make([]domain.Uplink, 0, nLeaves*spines),
	}
	for k := range o.SuperSpines {
		f.SuperSpines = append(f.SuperSpines, domain.Switch{
			Name: fmt.Sprintf("super%d", k+1), ASN: baseASN,
			Loopback:  netip.AddrFrom4([4]byte{10, 252, 0, byte(k + 1)}).String(),
			PortCount: radix(pods * spines), NOS: o.NOS, Platform: plat(),
		})
	}
	for p := 1; p <= pods; p++ {
		for j := range spines {
			sw := domain.Switch{
				Name: fmt.Sprintf("spine%d", j+1), ASN: baseASN,
				Loopback:  netip.AddrFrom4([4]byte{10, 254, 0, byte(j + 1)}).String(),
				PortCount: radix(podLeaves + o.SuperSpines), NOS: o.NOS, Platform: plat(),
			}
			if three {
				sw.Name, sw.ASN, sw.Pod = fmt.Sprintf("p%d-spine%d", p, j+1), baseASN+uint32(p), ptr(p)
				sw.Loopback = netip.AddrFrom4([4]byte{10, 252, byte(p), byte(j + 1)}).String()
			}
			f.Spines = append(f.Spines, sw)
		}
	}
	stripesPerPod := o.Stripes / pods
	podOf := func(stripe int) int { return (stripe-1)/stripesPerPod + 1 }
	leafPorts := radix(s + spines)
	for st := 1; st <= o.Stripes; st++ {
		for r := range g {
			li := (st-1)*g + r
			sw := domain.Switch{
				Name: leafName(st, r), ASN: baseASN + firstLeaf + uint32(li),
				Loopback: netip.AddrFrom4([4]byte{10, 254, byte(1 + li/250), byte(1 + li%250)}).String(),
				Stripe:   ptr(st), Rail: ptr(r), PortCount: leafPorts, NOS: o.NOS, Platform: plat(),
			}
			if three {
				sw.Pod = ptr(podOf(st))
			}
			f.Leaves = append(f.Leaves, sw)
		}
	}

	width := max(3, len(strconv.Itoa(s)))
	spd := o.NVLinkDomainSize / g // servers per NVLink domain
	dwidth := max(2, len(strconv.Itoa(s/spd)))
	for st := 1; st <= o.Stripes; st++ {
		for k := 1; k <= s; k++ {
			name := fmt.Sprintf("s%d-gpu%0*d", st, width, k)
			nvl := name
			if spd > 1 {
				nvl = fmt.Sprintf("s%d-nvl%0*d", st, dwidth, (k-1)/spd+1)
			}
			srv := domain.Server{
				Name: name, Stripe: st, GPUModel: o.GPUModel, GPUs: g, NVLinkDomain: nvl,
				GPUNUMA: make([]int, g), Driver: o.Driver, NICs: make([]domain.NIC, g),
			}
			for i := range g {
				// First half of the GPUs and NICs on NUMA node 0, second half
				// on node 1: the usual two-socket layout.
				numa := i * 2 / g
				srv.GPUNUMA[i] = numa
				srv.NICs[i] = domain.NIC{Name: fmt.Sprintf("nic%d", i), RDMADevice: fmt.Sprintf("mlx5_%d", i), Rail: i, NUMA: numa, GPU: i}
				f.Cables = append(f.Cables, domain.Cable{Server: name, NIC: srv.NICs[i].Name, Leaf: leafName(st, i), Port: portName(k)})
			}
			f.Servers = append(f.Servers, srv)
		}
	}
	for li := range f.Leaves {
		p := li / podLeaves // the leaf's pod, from 0
		for j := range spines {
			f.Uplinks = append(f.Uplinks, domain.Uplink{
				Leaf: f.Leaves[li].Name, LeafPort: portName(s + j + 1),
				Spine: f.Spines[p*spines+j].Name, SpinePort: portName(li - p*podLeaves + 1),
			})
		}
	}
	for si := range f.Spines {
		for k := range f.SuperSpines {
			f.SpineUplinks = append(f.SpineUplinks, domain.SpineUplink{
				Spine: f.Spines[si].Name, SpinePort: portName(podLeaves + k + 1),
				SuperSpine: f.SuperSpines[k].Name, SuperSpinePort: portName(si + 1),
			})
		}
	}

	t := &domain.Topology{Sites: []domain.Site{{Name: o.Site, Fabrics: []domain.Fabric{f}}}}
	if err := Normalize(t, nil); err != nil {
		return nil, err
	}
	return t, nil
}

func leafName(stripe, rail int) string { return fmt.Sprintf("s%d-leaf%d", stripe, rail) }

// switchRadix rounds a port need up to a common switch size, so generated
// switches look like real ones and keep spare ports to grow into.
func switchRadix(need int) int {
	for _, r := range []int{32, 64, 128, 256, 512, 1024} {
		if need <= r {
			return r
		}
	}
	return need
}

func ptr[T any](v T) *T { return &v }
