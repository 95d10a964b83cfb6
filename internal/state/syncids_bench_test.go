package state

import (
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/pool"
)

// BenchmarkSyncIDs is the id sync every fabric revision costs twice (the
// leader's FabricInput, then every member's apply) on a SONiC fabric of
// 56 leaves (the most an SN5600 spine takes in two tiers), 2,688 GPUs,
// 1,000 tenants and 1,500 jobs: first the sync that allocates every id,
// then the steady one that finds them all held. With every VRF on every
// leaf each leaf's L3 VLAN pool holds every tenant's; where used, its own
// tenants' only.
func BenchmarkSyncIDs(b *testing.B) {
	for _, placement := range []fabric.VRFPlacement{fabric.VRFsOnAllLeaves, fabric.VRFsWhereUsed} {
		in, err := fabrictest.Scale(fabrictest.ScaleOptions{Stripes: 7, ServersPerStripe: 48, Spines: 8, Tenants: 1000, Jobs: 1500, NOS: "sonic", Placement: placement})
		if err != nil {
			b.Fatal(err)
		}
		in.IDs, in.Groups = fabric.IDs{}, nil
		now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
		b.Run(string(placement)+"/first", func(b *testing.B) {
			for b.Loop() {
				ps, _ := pool.New()
				x := in
				if err := syncIDs(ps, &x, now, vlanRange{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		ps, _ := pool.New()
		x := in
		if err := syncIDs(ps, &x, now, vlanRange{}); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: %d L3 VLANs on %d leaves", placement, len(x.IDs.L3VLANs), len(in.Topology.Sites[0].Fabrics[0].Leaves))
		b.Run(string(placement)+"/steady", func(b *testing.B) {
			for b.Loop() {
				c := ps.Clone()
				y := in
				if err := syncIDs(c, &y, now, vlanRange{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
