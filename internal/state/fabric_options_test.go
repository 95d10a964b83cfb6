package state

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/pool"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestFabricOptions: the options are checked (field, value, rule) and,
// against the id pools, refused when a leaf would carry more VRFs than
// its L3 VLAN range holds; a refusal changes nothing, and the compiler's
// input follows what was set.
func TestFabricOptions(t *testing.T) {
	h := newHarness(t)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 2, Spines: 1, NOS: "sonic"})
	if err != nil {
		t.Fatal(err)
	}
	h.must(CmdTopologyApply, TopologyApply{Topology: *topo})
	for i := range 3 {
		h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant(fmt.Sprintf("t%d", i)).Obj()})
	}
	if o := h.f.FabricOptions(); o != (FabricOptions{VRFPlacement: fabric.VRFsOnAllLeaves, L3VLANMin: 3000, L3VLANMax: 4094}) {
		t.Fatalf("default options %+v", o)
	}
	for name, tc := range map[string]struct {
		o     FabricOptions
		code  domain.Code
		field string
		msg   string
	}{
		"unknown placement":  {FabricOptions{VRFPlacement: "some"}, domain.CodeInvalidArgument, "vrfPlacement", `VRF placement "some" is not one of all`},
		"into link VLANs":    {FabricOptions{L3VLANMin: 2999, L3VLANMax: 3500}, domain.CodeInvalidArgument, "l3VLANs", "within 3000-4094"},
		"reserved 4095":      {FabricOptions{L3VLANMin: 3000, L3VLANMax: 4095}, domain.CodeInvalidArgument, "l3VLANs", "within 3000-4094"},
		"empty range":        {FabricOptions{L3VLANMin: 3500, L3VLANMax: 3400}, domain.CodeInvalidArgument, "l3VLANs", "non-empty"},
		"only a minimum":     {FabricOptions{L3VLANMin: 3500}, domain.CodeInvalidArgument, "l3VLANs", "3500-0"},
		"3 VRFs on 2 VLANs":  {FabricOptions{L3VLANMin: 3000, L3VLANMax: 3001}, domain.CodeFailedPrecondition, "l3VLANs", `l3VLANs 3000-3001: the VRFs the leaves would carry need more L3 VLANs than a leaf has`},
		"names the leaf too": {FabricOptions{L3VLANMin: 4000, L3VLANMax: 4001}, domain.CodeFailedPrecondition, "l3VLANs", `pool "l3vlan/s1-leaf0" (4000-4001) is exhausted`},
	} {
		t.Run(name, func(t *testing.T) {
			r := h.refusedChangesNothing(CmdFabricOptions, FabricOptionsSet{Options: tc.o})
			if r.Err == nil || r.Err.Code != tc.code || r.Err.Field != tc.field || !strings.Contains(r.Err.Message, tc.msg) {
				t.Fatalf("%+v: %v; want %s on %s saying %q", tc.o, r.Err, tc.code, tc.field, tc.msg)
			}
		})
	}
	// VRFs where used: no job, no VRF, no L3 VLAN; then 2 VLANs a leaf
	// do, and going back to every leaf is refused naming the placement.
	h.must(CmdFabricOptions, FabricOptionsSet{Options: FabricOptions{VRFPlacement: fabric.VRFsWhereUsed}})
	h.must(CmdFabricOptions, FabricOptionsSet{Options: FabricOptions{VRFPlacement: fabric.VRFsWhereUsed, L3VLANMin: 3000, L3VLANMax: 3001}})
	in, _, _, err := h.f.FabricInput(h.at, nil)
	if err != nil || in.Options.VRFPlacement != fabric.VRFsWhereUsed || len(in.IDs.L3VLANs) != 0 {
		t.Fatalf("input with VRFs where used and no job: %v, placement %q, L3 VLANs %v", err, in.Options.VRFPlacement, in.IDs.L3VLANs)
	}
	r := h.refusedChangesNothing(CmdFabricOptions, FabricOptionsSet{Options: FabricOptions{L3VLANMin: 3000, L3VLANMax: 3001}})
	if r.Err == nil || r.Err.Field != "vrfPlacement" || !strings.Contains(r.Err.Message, "vrfPlacement all: ") {
		t.Fatalf("every VRF on every leaf with 2 L3 VLANs a leaf for 3 tenants: %v; want refused naming vrfPlacement", r.Err)
	}
	if o := h.f.FabricOptions(); o != (FabricOptions{VRFPlacement: fabric.VRFsWhereUsed, L3VLANMin: 3000, L3VLANMax: 3001}) {
		t.Fatalf("options %+v", o)
	}
	// Back to the defaults: the state holds none of them.
	h.must(CmdFabricOptions, FabricOptionsSet{})
	if fd := h.f.d.Fabric; fd.Options != (fabric.Options{}) || fd.L3VLANMin != 0 || fd.L3VLANMax != 0 {
		t.Fatalf("defaults stored as %+v %d-%d", fd.Options, fd.L3VLANMin, fd.L3VLANMax)
	}
	h.replays()
}

// TestTenantNeedsL3VLANRoom: with every VRF on every leaf, a tenant a
// SONiC leaf has no L3 VLAN for is refused (created, or given the site),
// counting ids in quarantine as taken; with VRFs where used it is not.
func TestTenantNeedsL3VLANRoom(t *testing.T) {
	h := newHarness(t)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 2, Spines: 1, NOS: "sonic"})
	if err != nil {
		t.Fatal(err)
	}
	h.must(CmdTopologyApply, TopologyApply{Topology: *topo})
	site := topo.Sites[0].Name
	h.must(CmdFabricOptions, FabricOptionsSet{Options: FabricOptions{L3VLANMin: 3000, L3VLANMax: 3001}})
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("t0").Obj()})
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("t1").Obj()})
	refused := func(ct CommandType, payload any, field, msg string) {
		t.Helper()
		r := h.refusedChangesNothing(ct, payload)
		if r.Err == nil || r.Err.Code != domain.CodeFailedPrecondition || r.Err.Field != field || !strings.Contains(r.Err.Message, msg) {
			t.Fatalf("%s: %v; want refused on %s saying %q", ct, r.Err, field, msg)
		}
	}
	refused(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("t2").Obj()}, "name",
		"tenant t2: with every tenant's VRF on every leaf of its sites, leaf s1-leaf0 would carry 3 VRFs, and its L3 VLANs 3000-3001 have room for 2 (0 in quarantine or still deployed)")
	// A tenant of another site only takes no VLAN here; given this site,
	// it would.
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("elsewhere").Sites("dc9").Obj()})
	refused(CmdTenantUpdate, TenantUpdate{Name: "elsewhere", Sites: []string{site}}, "sites", "leaf s1-leaf0 would carry 3 VRFs")
	// t1 leaves after a revision gave it a VLAN: that VLAN is in
	// quarantine, so there is still no room.
	h.must(CmdFabricRevision, h.revision("s1-leaf0", "two tenants", nil))
	h.must(CmdTenantDelete, TenantDelete{Name: "t1"})
	h.must(CmdFabricRevision, h.revision("s1-leaf0", "one tenant", nil))
	refused(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("t2").Obj()}, "name", "have room for 1 (1 in quarantine or still deployed)")
	// With VRFs where used, tenants take no VLAN until they hold a port.
	h.must(CmdFabricOptions, FabricOptionsSet{Options: FabricOptions{VRFPlacement: fabric.VRFsWhereUsed, L3VLANMin: 3000, L3VLANMax: 3001}})
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("t2").Obj()})
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("t3").Obj()})
	h.replays()
}

// TestGateWaitsForEveryLeafOfAWholeServer: a server-isolated tenant's job
// holding one GPU of a server owns every link of the server (and, with
// VRFs where used, brings its VRF to each of their leaves): the job is
// Ready only once the revision is deployed on all of them, not only on
// its GPU's leaf.
func TestGateWaitsForEveryLeafOfAWholeServer(t *testing.T) {
	h := newHarness(t)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 2, Spines: 1})
	if err != nil {
		t.Fatal(err)
	}
	h.must(CmdTopologyApply, TopologyApply{Topology: *topo})
	h.must(CmdFabricOptions, FabricOptionsSet{Options: FabricOptions{VRFPlacement: fabric.VRFsWhereUsed}})
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("acme").Obj()}) // server isolation
	h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "research").Guaranteed(2).Borrow(2).Obj()})
	h.must(CmdJobSubmit, MakeJob("research", 1).Obj())
	srv := topo.Sites[0].Fabrics[0].Servers[0].Name
	h.must(CmdJobsPlace, JobsPlace{NetworkGate: true, Jobs: []JobPlacement{{ID: 1, Placements: []domain.Placement{{Server: srv, GPUs: []int{0}, Leaves: []string{"s1-leaf0"}}}}}})
	_, ids, jobs, err := h.f.FabricInput(h.at, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := FabricRevisionCmd{SyncAt: h.at, IDsHash: ids, Jobs: jobs, Changed: map[string]DeviceConfig{}}
	for _, leaf := range []string{"s1-leaf0", "s1-leaf1"} {
		files := []File{{Name: "frr.conf", Content: "vrf acme on " + leaf}}
		cmd.Changed[leaf] = DeviceConfig{NOS: "frr", Role: "leaf", Files: files, Hash: ConfigHash("frr", files)}
	}
	h.must(CmdFabricRevision, cmd)
	h.deployedOK(1, "s1-leaf0")
	if j, _ := h.f.Job(1); j.State != domain.JobPlaced || j.Reason == nil || !strings.Contains(j.Reason.Message, "waiting for fabric revision 1 on s1-leaf1") {
		t.Fatalf("deployed on its GPU's leaf only: %s %+v; want Placed, waiting for s1-leaf1 (the server's other link)", j.State, j.Reason)
	}
	h.deployedOK(1, "s1-leaf1")
	if j, _ := h.f.Job(1); j.State != domain.JobReady {
		t.Fatalf("deployed on both leaves: %s %+v", j.State, j.Reason)
	}
	h.replays()
}

// TestTopologyNeedsL3VLANRoom: with every VRF on every leaf, a topology
// whose leaves turn NX-OS or SONiC (one L3 VLAN per VRF) is refused when a
// leaf's range cannot hold every tenant; with VRFs where used it passes.
func TestTopologyNeedsL3VLANRoom(t *testing.T) {
	h := newHarness(t)
	gen := func(nos string) *domain.Topology {
		topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 2, Spines: 1, NOS: nos})
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	h.must(CmdTopologyApply, TopologyApply{Topology: *gen("frr")})
	h.must(CmdFabricOptions, FabricOptionsSet{Options: FabricOptions{L3VLANMin: 3000, L3VLANMax: 3001}}) // FRR leaves need none
	for i := range 3 {
		h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant(fmt.Sprintf("t%d", i)).Obj()})
	}
	r := h.refusedChangesNothing(CmdTopologyApply, TopologyApply{Topology: *gen("sonic")})
	if r.Err == nil || r.Err.Code != domain.CodeFailedPrecondition || r.Err.Field != "sites" ||
		!strings.Contains(r.Err.Message, "the topology: with every tenant's VRF on every leaf of its sites, leaf s1-leaf0 would carry 3 VRFs, and its L3 VLANs 3000-3001 have room for 2") {
		t.Fatalf("SONiC leaves for 3 tenants in 2 L3 VLANs: %v", r.Err)
	}
	h.must(CmdFabricOptions, FabricOptionsSet{Options: FabricOptions{VRFPlacement: fabric.VRFsWhereUsed, L3VLANMin: 3000, L3VLANMax: 3001}})
	h.must(CmdTopologyApply, TopologyApply{Topology: *gen("sonic")})
	h.replays()
}

// TestNXOSLeafL3VLANsStopBelowReserved: by default an NX-OS leaf's L3 VLANs
// end at 3967, below the 128 VLANs the switch reserves (3968-4094), where a
// SONiC leaf's go to 4094; a range the operator sets applies as given (the
// render lint guards a reserved VLAN on NX-OS then).
func TestNXOSLeafL3VLANsStopBelowReserved(t *testing.T) {
	for _, tc := range []struct {
		nos                 string
		byDefault, operator [2]uint32
	}{
		{"nxos", [2]uint32{3000, 3967}, [2]uint32{3100, 4094}},
		{"sonic", [2]uint32{3000, 4094}, [2]uint32{3100, 4094}},
	} {
		t.Run(tc.nos, func(t *testing.T) {
			h := newHarness(t)
			topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 2, Spines: 1, NOS: tc.nos})
			if err != nil {
				t.Fatal(err)
			}
			leaf := topo.Sites[0].Fabrics[0].Leaves[0].Name
			h.must(CmdTopologyApply, TopologyApply{Topology: *topo})
			h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("t0").Obj()})
			h.must(CmdFabricRevision, h.revision(leaf, "a tenant", nil))
			rangeOf := func() [2]uint32 {
				p := h.f.pools().Pools[pool.LeafL3VLAN(leaf)]
				if p == nil {
					t.Fatalf("leaf %s has no L3 VLAN pool", leaf)
				}
				return [2]uint32{p.Min, p.Max}
			}
			if got := rangeOf(); got != tc.byDefault {
				t.Fatalf("default L3 VLAN range %v, want %v", got, tc.byDefault)
			}
			h.must(CmdFabricOptions, FabricOptionsSet{Options: FabricOptions{L3VLANMin: 3100, L3VLANMax: 4094}})
			h.must(CmdFabricRevision, h.revision(leaf, "the operator's range", nil))
			if got := rangeOf(); got != tc.operator {
				t.Fatalf("L3 VLAN range with the operator's 3100-4094: %v, want %v", got, tc.operator)
			}
			h.replays()
		})
	}
}
