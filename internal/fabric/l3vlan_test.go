package fabric_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
)

// TestLeafL3VLANs: a per-leaf L3 VLAN replaces the tenant's fabric-wide one
// on its leaf only, two tenants may share a number on different leaves,
// and the incremental compiler renumbers exactly the VRF it is told to.
func TestLeafL3VLANs(t *testing.T) {
	in := input(t, "nxos", fabrictest.PureRT5)
	in.IDs.L3VLANs = map[fabric.LeafTenant]uint16{
		{Leaf: "s1-leaf0", Tenant: "acme"}:   3100,
		{Leaf: "s1-leaf1", Tenant: "globex"}: 3100, // the same number, another leaf
	}
	it := compile(t, in)
	for _, c := range []struct {
		leaf, tenant string
		want         uint16
	}{{"s1-leaf0", "acme", 3100}, {"s1-leaf0", "globex", 3002}, {"s1-leaf1", "globex", 3100}, {"s1-leaf1", "acme", 3001}} {
		if v := it.Device(c.leaf).VRF(c.tenant); v == nil || v.L3VLAN != c.want {
			t.Fatalf("%s VRF %s: %+v, want L3 VLAN %d", c.leaf, c.tenant, v, c.want)
		}
	}
	k, err := fabric.NewCompiler(in)
	if err != nil {
		t.Fatal(err)
	}
	ch := fabric.Change{L3VLANs: map[fabric.LeafTenant]uint16{{Leaf: "s2-leaf1", Tenant: "acme"}: 3200}, DropL3VLANs: []fabric.LeafTenant{{Leaf: "s1-leaf0", Tenant: "acme"}}}
	changed, err := k.Apply(ch)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range changed {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "s1-leaf0,s2-leaf1" {
		t.Fatalf("changed %v, want s1-leaf0 and s2-leaf1", names)
	}
	in.IDs.L3VLANs = map[fabric.LeafTenant]uint16{{Leaf: "s1-leaf1", Tenant: "globex"}: 3100, {Leaf: "s2-leaf1", Tenant: "acme"}: 3200}
	if want := compile(t, in); !reflect.DeepEqual(k.Intent(), want) {
		t.Fatal("the incremental intent differs from a full compile")
	}
	if v := k.Intent().Device("s1-leaf0").VRF("acme"); v.L3VLAN != 3001 {
		t.Fatalf("s1-leaf0 acme after the drop: L3 VLAN %d, want the fabric-wide 3001", v.L3VLAN)
	}
}

// TestFiveThousandTenants: with L3 VLANs per leaf and VRFs where used,
// the number of tenants is bounded by what a leaf carries, not by 4,094
// VLANs across the fabric.
func TestFiveThousandTenants(t *testing.T) {
	in, err := fabrictest.Scale(fabrictest.ScaleOptions{Stripes: 16, ServersPerStripe: 64, Spines: 2, Tenants: 5000, Jobs: 5000, Placement: fabric.VRFsWhereUsed})
	if err != nil {
		t.Fatal(err)
	}
	it := compile(t, in)
	tenants := map[string]bool{}
	for _, d := range it.Devices {
		seen := map[uint16]string{}
		for _, v := range d.VRFs {
			tenants[v.Tenant] = true
			if v.L3VLAN == 0 {
				t.Fatalf("%s VRF %s has no L3 VLAN", d.Name, v.Name)
			}
			if other, dup := seen[v.L3VLAN]; dup {
				t.Fatalf("%s: L3 VLAN %d for %s and %s", d.Name, v.L3VLAN, other, v.Name)
			}
			seen[v.L3VLAN] = v.Name
		}
	}
	// More tenants hold VRFs than the old fabric-wide L3 VLAN pool held
	// (1,094), every one of the 5,000 has its ids.
	if len(tenants) <= 1094 || len(in.Tenants) != 5000 {
		t.Fatalf("%d of %d tenants have a VRF somewhere; want more than 1,094", len(tenants), len(in.Tenants))
	}
	// Every tenant on every leaf does not fit a leaf's VLANs.
	if _, err := fabrictest.Scale(fabrictest.ScaleOptions{Stripes: 1, ServersPerStripe: 8, Spines: 1, Tenants: 1200, Jobs: 10}); err == nil || !strings.Contains(err.Error(), "L3 VLANs 3000-4094") {
		t.Fatalf("1,200 tenants on every leaf: %v", err)
	}
}

func TestLeafL3VLANErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		l3    map[fabric.LeafTenant]uint16
		links bool
		field string
		msg   string
	}{
		"two tenants, one VLAN, one leaf": {map[fabric.LeafTenant]uint16{{Leaf: "s1-leaf0", Tenant: "acme"}: 3100, {Leaf: "s1-leaf0", Tenant: "globex"}: 3100},
			false, "ids.l3vlans[s1-leaf0/globex]", "already tenant acme's there"},
		"another tenant's fabric-wide VLAN": {map[fabric.LeafTenant]uint16{{Leaf: "s1-leaf0", Tenant: "acme"}: 3002},
			false, "ids.l3vlans[s1-leaf0/acme]", "fabric-wide L3 VLAN of tenant globex"},
		"out of range":  {map[fabric.LeafTenant]uint16{{Leaf: "s1-leaf0", Tenant: "acme"}: 4095}, false, "ids.l3vlans[s1-leaf0/acme]", "2..4094"},
		"not a leaf":    {map[fabric.LeafTenant]uint16{{Leaf: "spine1", Tenant: "acme"}: 3100}, false, "ids.l3vlans[spine1/acme]", "not a leaf"},
		"no tenant":     {map[fabric.LeafTenant]uint16{{Leaf: "s1-leaf0", Tenant: "hooli"}: 3100}, false, "ids.l3vlans[s1-leaf0/hooli]", "not in the input"},
		"a link's VLAN": {map[fabric.LeafTenant]uint16{{Leaf: "s1-leaf0", Tenant: "acme"}: 1000}, true, "ids.links[s1-leaf0/swp3].vlan", "L3 VLAN of tenant acme on leaf s1-leaf0"},
	} {
		t.Run(name, func(t *testing.T) {
			model := fabrictest.PureRT5
			if tc.links {
				model = fabrictest.VLANAware
			}
			in := input(t, "frr", model)
			in.IDs.L3VLANs = tc.l3
			_, err := fabric.Compile(in)
			var de *domain.Error
			if !errors.As(err, &de) || de.Field != tc.field || !strings.Contains(de.Message, tc.msg) {
				t.Fatalf("%v (field %v); want field %s, message with %q", err, de, tc.field, tc.msg)
			}
			if _, err := fabric.NewCompiler(in); err == nil {
				t.Fatal("NewCompiler accepted what Compile refuses")
			}
		})
	}
}
