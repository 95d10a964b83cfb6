package state

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/pool"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// l3Input is a one-stripe fabric of nos leaves (2 rails: s1-leaf0 and
// s1-leaf1) with tenants t000..t<n-1>, every VRF on every leaf.
func l3Input(t *testing.T, nos string, n int) fabric.Input {
	t.Helper()
	top, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 2, Spines: 1, NOS: nos})
	if err != nil {
		t.Fatal(err)
	}
	in := fabric.Input{Topology: top}
	for i := range n {
		in.Tenants = append(in.Tenants, domain.Tenant{Name: fmt.Sprintf("t%03d", i), Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5})
	}
	return in
}

// TestL3VLANsPerLeaf: L3 VLANs come from each leaf's own pool, only on
// leaves whose NOS needs them, stay put across syncs and when tenants
// come and go, and bound the tenants by what one leaf carries.
func TestL3VLANsPerLeaf(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	ps, _ := pool.New()
	in := l3Input(t, "sonic", 3)
	if err := syncIDs(ps, &in, now, vlanRange{}); err != nil {
		t.Fatal(err)
	}
	want := map[fabric.LeafTenant]uint16{}
	for _, leaf := range []string{"s1-leaf0", "s1-leaf1"} {
		for i := range 3 {
			want[fabric.LeafTenant{Leaf: leaf, Tenant: fmt.Sprintf("t%03d", i)}] = uint16(3000 + i)
		}
	}
	if fmt.Sprint(in.IDs.L3VLANs) != fmt.Sprint(want) {
		t.Fatalf("L3 VLANs %v, want %v", in.IDs.L3VLANs, want)
	}
	if _, err := fabric.Compile(in); err != nil {
		t.Fatal(err)
	}
	// A tenant goes and another comes: nobody else is renumbered, and
	// the leaving tenant's VLAN waits in quarantine.
	in2 := l3Input(t, "sonic", 4)
	in2.Tenants = append(in2.Tenants[:1], in2.Tenants[2:]...) // t001 leaves, t003 comes
	if err := syncIDs(ps, &in2, now.Add(time.Minute), vlanRange{}); err != nil {
		t.Fatal(err)
	}
	for _, leaf := range []string{"s1-leaf0", "s1-leaf1"} {
		got := func(tn string) uint16 { return in2.IDs.L3VLANs[fabric.LeafTenant{Leaf: leaf, Tenant: tn}] }
		if got("t000") != 3000 || got("t002") != 3002 || got("t003") != 3003 {
			t.Fatalf("%s: t000 %d, t002 %d, t003 %d; want 3000, 3002 and a new 3003", leaf, got("t000"), got("t002"), got("t003"))
		}
	}
	// FRR leaves carry no L3 VLAN: none is allocated.
	frr := l3Input(t, "frr", 3)
	ps2, _ := pool.New()
	if err := syncIDs(ps2, &frr, now, vlanRange{}); err != nil || len(frr.IDs.L3VLANs) != 0 {
		t.Fatalf("frr leaves: %v, L3 VLANs %v; want none", err, frr.IDs.L3VLANs)
	}
	// More tenants than a leaf's range holds, all on every leaf: refused,
	// naming the leaf's pool.
	many := l3Input(t, "sonic", 1100)
	ps3, _ := pool.New()
	err := syncIDs(ps3, &many, now, vlanRange{})
	if e, ok := err.(*domain.Error); !ok || !strings.Contains(e.Field, "l3vlan/s1-leaf") {
		t.Fatalf("1,100 tenants on every sonic leaf: %v; want the leaf's L3 VLAN pool exhausted", err)
	}
}

// TestL3VLANsKeepFabricWideNumbers: a tenant that held a fabric-wide L3
// VLAN before per-leaf pools keeps its number on every leaf.
func TestL3VLANsKeepFabricWideNumbers(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	ps, _ := pool.New(pool.DefaultSpecs(pool.DefaultQuarantine)...)
	if err := ps.Reserve(pool.L3VLAN, "tenant/t001", 3777, now); err != nil {
		t.Fatal(err)
	}
	in := l3Input(t, "sonic", 2)
	if err := syncIDs(ps, &in, now, vlanRange{}); err != nil {
		t.Fatal(err)
	}
	for _, leaf := range []string{"s1-leaf0", "s1-leaf1"} {
		if v := in.IDs.L3VLANs[fabric.LeafTenant{Leaf: leaf, Tenant: "t001"}]; v != 3777 {
			t.Fatalf("%s: t001 has L3 VLAN %d, want its fabric-wide 3777", leaf, v)
		}
	}
}
