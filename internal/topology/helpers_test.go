package topology

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// builder makes small hand-written topologies for tests: one site, one
// fabric, switches with made-up ASNs and loopbacks.
type builder struct {
	f  domain.Fabric
	sw int
}

func newBuilder() *builder {
	return &builder{f: domain.Fabric{Name: "f1"}}
}

func (b *builder) pools(v4, v6 string) *builder {
	b.f.LinkPools = domain.LinkPools{IPv4: v4, IPv6: v6}
	return b
}

func (b *builder) nextSwitch(name string) domain.Switch {
	b.sw++
	return domain.Switch{Name: name, ASN: uint32(65000 + b.sw), Loopback: fmt.Sprintf("10.254.0.%d", b.sw), PortCount: 32}
}

func (b *builder) spine(name string) *builder {
	b.f.Spines = append(b.f.Spines, b.nextSwitch(name))
	return b
}

func (b *builder) leaf(name string, stripe, rail int) *builder {
	s := b.nextSwitch(name)
	s.Stripe, s.Rail = ptr(stripe), ptr(rail)
	b.f.Leaves = append(b.f.Leaves, s)
	return b
}

// server adds a server with one NIC per GPU, nic<i> on rail i.
func (b *builder) server(name string, stripe, gpus int) *builder {
	s := domain.Server{Name: name, Stripe: stripe, GPUModel: "H100-80GB", GPUs: gpus}
	for i := range gpus {
		s.NICs = append(s.NICs, domain.NIC{Name: fmt.Sprintf("nic%d", i), Rail: i, GPU: i})
	}
	b.f.Servers = append(b.f.Servers, s)
	return b
}

func (b *builder) cable(server, nic, leaf, port string) *builder {
	b.f.Cables = append(b.f.Cables, domain.Cable{Server: server, NIC: nic, Leaf: leaf, Port: port})
	return b
}

func (b *builder) uplink(leaf, leafPort, spine, spinePort string) *builder {
	b.f.Uplinks = append(b.f.Uplinks, domain.Uplink{Leaf: leaf, LeafPort: leafPort, Spine: spine, SpinePort: spinePort})
	return b
}

func (b *builder) build() *domain.Topology {
	return &domain.Topology{Sites: []domain.Site{{Name: "dc1", Fabrics: []domain.Fabric{b.f}}}}
}

// small is a generated 1 stripe x 2 servers x 2 GPUs, 1 spine cluster:
//
//	cables[0] s1-gpu001/nic0 -> s1-leaf0/swp1   cables[1] s1-gpu001/nic1 -> s1-leaf1/swp1
//	cables[2] s1-gpu002/nic0 -> s1-leaf0/swp2   cables[3] s1-gpu002/nic1 -> s1-leaf1/swp2
//	uplinks[0] s1-leaf0/swp3 -> spine1/swp1     uplinks[1] s1-leaf1/swp3 -> spine1/swp2
func small(t testing.TB) *domain.Topology {
	t.Helper()
	topo, err := Generate(smallOptions)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

var smallOptions = GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 2, Spines: 1}

// asDomain fails the test unless err is an invalid_argument *domain.Error.
func asDomain(t *testing.T, err error) *domain.Error {
	t.Helper()
	var de *domain.Error
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *domain.Error", err, err)
	}
	if de.Code != domain.CodeInvalidArgument {
		t.Fatalf("code = %s, want invalid_argument (%v)", de.Code, de)
	}
	return de
}

// hasDetail reports whether e lists a problem with that rule at that field.
func hasDetail(e *domain.Error, rule, field string) bool {
	for _, d := range e.Details {
		if d.Rule == rule && d.Field == field {
			return true
		}
	}
	return false
}

func describeDetails(e *domain.Error) string {
	if e == nil {
		return "<nil>"
	}
	var b strings.Builder
	for _, d := range e.Details {
		fmt.Fprintf(&b, "\n  %s @ %s [%s]: %s", d.Rule, d.Field, d.Object, d.Message)
	}
	return b.String()
}

// portName is the generic platform's port n (swpN).
func portName(n int) string { return DefaultPortPrefix + strconv.Itoa(n) }
