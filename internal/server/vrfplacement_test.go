package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// sonicLeaf is what one SONiC config_db.json applied to a leaf says:
// each VRF's L3 VLAN, and each server port's VRF.
type sonicLeaf struct {
	rev   uint64
	vrfs  map[string]string // VRF -> its L3 VLAN interface ("Vlan3000")
	ports map[string]string // port -> VRF
	done  time.Time
}

// sonicRecorder is a driver that records every config applied to a
// leaf, as the switch would read it (CONFIG_DB's VRF, VLAN_INTERFACE and
// INTERFACE tables).
type sonicRecorder struct {
	mu  sync.Mutex
	log map[string][]sonicLeaf
}

func (r *sonicRecorder) Name() string { return "sonic-recorder" }

func (r *sonicRecorder) Apply(ctx context.Context, d deploy.Device) error {
	if !strings.Contains(d.Name, "-leaf") {
		return nil
	}
	l := sonicLeaf{rev: d.Rev, vrfs: map[string]string{}, ports: map[string]string{}}
	for _, f := range d.Files {
		if f.Name != "config_db.json" {
			continue
		}
		var db struct {
			VRF           map[string]json.RawMessage `json:"VRF"`
			VLANInterface map[string]struct {
				VRF string `json:"vrf_name"`
			} `json:"VLAN_INTERFACE"`
			Interface map[string]struct {
				VRF string `json:"vrf_name"`
			} `json:"INTERFACE"`
		}
		if err := json.Unmarshal([]byte(f.Content), &db); err != nil {
			return fmt.Errorf("%s: config_db.json: %w", d.Name, err)
		}
		for v := range db.VRF {
			l.vrfs[v] = ""
		}
		for vlan, vi := range db.VLANInterface {
			if _, ok := l.vrfs[vi.VRF]; !ok || l.vrfs[vi.VRF] != "" {
				return fmt.Errorf("%s: %s is in VRF %q, which is not configured or has another L3 VLAN", d.Name, vlan, vi.VRF)
			}
			l.vrfs[vi.VRF] = vlan
		}
		for port, in := range db.Interface {
			if !strings.Contains(port, "|") && in.VRF != "" {
				l.ports[port] = in.VRF
			}
		}
	}
	l.done = time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.log == nil {
		r.log = map[string][]sonicLeaf{}
	}
	r.log[d.Name] = append(r.log[d.Name], l)
	return nil
}

// latest is the last config applied to each leaf.
func (r *sonicRecorder) latest() map[string]sonicLeaf {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]sonicLeaf{}
	for leaf, ls := range r.log {
		out[leaf] = ls[len(ls)-1]
	}
	return out
}

// firstWith is the first config applied to leaf with port in vrf.
func (r *sonicRecorder) firstWith(leaf, port, vrf string) (sonicLeaf, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.log[leaf] {
		if _, ok := l.vrfs[vrf]; ok && l.ports[port] == vrf {
			return l, true
		}
	}
	return sonicLeaf{}, false
}

func vrfOf(tenant string) string { return "Vrf_" + tenant }

// lastCause is the cause of the latest fabric revision.
func lastCause(t *testing.T, c *client.Client) string {
	t.Helper()
	var revs []api.RevisionInfo
	if err := c.Do(ctxT(t), "GET", "/v1/fabric/revisions", nil, &revs); err != nil {
		t.Fatal(err)
	}
	if len(revs) == 0 {
		return ""
	}
	return revs[len(revs)-1].Cause
}

// TestVRFsWhereUsed runs VRFs where used through the real state machine
// of three members and a driver reading what each SONiC leaf is given:
//   - a leaf carries exactly the VRFs of the tenants owning a port there
//     (a VRF never follows another tenant's job onto a leaf), and a port
//     is only ever in the VRF of the tenant whose job holds its GPU;
//   - a job is Ready only after its leaf was given its tenant's VRF;
//   - L3 VLANs stay put across unrelated changes, are freed when their
//     tenant leaves the leaf, and are the same on every member;
//   - an option change the leaves' L3 VLANs cannot carry is refused
//     naming the option and changes nothing; a job whose VRF would come
//     to a leaf with no L3 VLAN free waits, saying so (and nothing of
//     another tenant), while the rest of the fabric goes on, and gets its
//     network once the range grows.
func TestVRFsWhereUsed(t *testing.T) {
	drv := &sonicRecorder{}
	ctx := ctxT(t)
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(sctx, t.TempDir(), 3, devcluster.Options{Logger: quietLogger(), RaftTimeout: time.Second, Tune: func(cfg *server.Config) {
		cfg.Driver = drv
		cfg.ScheduleInterval = 100 * time.Millisecond
		// Every incremental compile (VRFs and L3 VLANs coming and going
		// with ports) is checked against a full one.
		cfg.CheckFabricCompile = true
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	admin := c.Client(0)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 3, GPUsPerServer: 2, Spines: 1, NOS: "sonic"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(topo)
	if _, err := admin.ApplyTopology(ctx, raw, false); err != nil {
		t.Fatal(err)
	}
	tenants := []string{"blue", "red", "green", "idle"}
	for _, tn := range tenants {
		if _, err := admin.CreateTenant(ctx, api.TenantCreateRequest{Name: tn, Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CreateWorkspace(ctx, tn, api.WorkspaceCreateRequest{Name: "w", BorrowLimit: 2}); err != nil {
			t.Fatal(err)
		}
	}
	// The port of each (server, GPU): the cable of the NIC next to it.
	portOf := map[string]string{} // "server/gpu" -> "leaf/port"
	leaves := []string{}
	for _, f := range topo.Sites[0].Fabrics {
		for _, l := range f.Leaves {
			leaves = append(leaves, l.Name)
		}
		nics := map[string]int{}
		for _, s := range f.Servers {
			for _, n := range s.NICs {
				nics[s.Name+"/"+n.Name] = n.GPU
			}
		}
		for _, cb := range f.Cables {
			if g, ok := nics[cb.Server+"/"+cb.NIC]; ok && g >= 0 {
				portOf[fmt.Sprintf("%s/%d", cb.Server, g)] = cb.Leaf + "/" + cb.Port
			}
		}
	}

	// settled compiles and deploys the current state now, and waits
	// until every device runs the latest revision.
	settled := func(step string) {
		t.Helper()
		var st api.FabricStatus
		if err := admin.Do(ctx, "POST", "/v1/fabric/deploy", nil, &st); err != nil {
			t.Fatalf("%s: deploy: %v", step, err)
		}
		waitState(t, c.Servers[c.Leader()], step+": every device deployed", func(f *state.FSM) bool {
			st := f.FabricStatus()
			for _, d := range st.Devices {
				if d.DeployedRev != st.Revision || d.Error != "" {
					return false
				}
			}
			return st.Revision > 0 && len(f.JobsAwaitingNetwork()) == len(f.HeldJobs())
		})
	}
	// owners lists, per leaf, the tenant of each port of a job with its
	// network (Ready or further).
	owners := func() map[string]map[string]string {
		t.Helper()
		jobs, err := admin.Jobs(ctx, client.JobQuery{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]string{}
		for _, j := range jobs {
			if j.NetworkRev == 0 || !j.State.HoldsGPUs() {
				continue
			}
			for _, p := range j.Placement {
				for _, g := range p.GPUs {
					leaf, port, _ := strings.Cut(portOf[fmt.Sprintf("%s/%d", p.Server, g)], "/")
					if out[leaf] == nil {
						out[leaf] = map[string]string{}
					}
					out[leaf][port] = j.Tenant
				}
			}
		}
		return out
	}
	// check: each leaf carries the VRFs of its ports' tenants and no
	// other, each port is in its tenant's VRF and no port is in any
	// other; it returns each leaf's L3 VLAN per tenant.
	check := func(step string) map[string]map[string]string {
		t.Helper()
		settled(step)
		own, got := owners(), drv.latest()
		vlans := map[string]map[string]string{}
		for _, leaf := range leaves {
			want := map[string]string{}
			for port, tn := range own[leaf] {
				want[vrfOf(tn)] = tn
				if v := got[leaf].ports[port]; v != vrfOf(tn) {
					t.Errorf("%s: %s/%s (tenant %s's GPU) is in VRF %q", step, leaf, port, tn, v)
				}
			}
			for port, v := range got[leaf].ports {
				if tn, ok := own[leaf][port]; !ok || vrfOf(tn) != v {
					t.Errorf("%s: %s/%s is in VRF %s, but its GPU is tenant %q's", step, leaf, port, v, tn)
				}
			}
			if !slices.Equal(slices.Sorted(maps.Keys(got[leaf].vrfs)), slices.Sorted(maps.Keys(want))) {
				t.Errorf("%s: %s carries VRFs %v; the tenants with a port there are %v", step, leaf, slices.Sorted(maps.Keys(got[leaf].vrfs)), slices.Sorted(maps.Values(want)))
			}
			vlans[leaf] = map[string]string{}
			seen := map[string]string{}
			for v, vlan := range got[leaf].vrfs {
				if o, dup := seen[vlan]; dup || vlan == "" {
					t.Errorf("%s: %s: VRF %s has L3 VLAN %q (VRF %q too)", step, leaf, v, vlan, o)
				}
				seen[vlan] = v
				vlans[leaf][strings.TrimPrefix(v, "Vrf_")] = vlan
			}
		}
		// Every member holds the same ids.
		now := time.Now()
		var first map[fabric.LeafTenant]uint16
		for i, s := range c.Servers {
			waitState(t, s, fmt.Sprintf("%s: member %d applied revision", step, i), func(f *state.FSM) bool {
				return f.FabricStatus().Revision == c.Servers[c.Leader()].State().FabricStatus().Revision
			})
			var held []uint64
			for _, h := range s.State().HeldJobs() {
				held = append(held, h.Job)
			}
			in, _, _, err := s.State().FabricInput(now, held)
			if err != nil {
				t.Fatalf("%s: member %d: %v", step, i, err)
			}
			if i == 0 {
				first = in.IDs.L3VLANs
			} else if !maps.Equal(first, in.IDs.L3VLANs) {
				t.Errorf("%s: member %d has L3 VLANs %v, member 0 %v", step, i, in.IDs.L3VLANs, first)
			}
		}
		for lt, v := range first {
			if got := vlans[lt.Leaf][lt.Tenant]; got != fmt.Sprintf("Vlan%d", v) {
				t.Errorf("%s: the state gives %s L3 VLAN %d on %s, the leaf runs %q", step, lt.Tenant, v, lt.Leaf, got)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		return vlans
	}
	// readyAfterVRF: the job was Ready only once each of its leaves had
	// been given its port in its tenant's VRF.
	readyAfterVRF := func(j *domain.Job) {
		t.Helper()
		for _, p := range j.Placement {
			for _, g := range p.GPUs {
				leaf, port, _ := strings.Cut(portOf[fmt.Sprintf("%s/%d", p.Server, g)], "/")
				l, ok := drv.firstWith(leaf, port, vrfOf(j.Tenant))
				if !ok {
					t.Fatalf("job %d is Ready, but %s never got %s in VRF %s", j.ID, leaf, port, vrfOf(j.Tenant))
				}
				if l.done.After(j.UpdatedAt) {
					t.Errorf("job %d was Ready at %s, before %s got its VRF (revision %d, applied %s)", j.ID, j.UpdatedAt, leaf, l.rev, l.done)
				}
			}
		}
	}
	ready := func(tenant string, gpus int) *domain.Job {
		t.Helper()
		spec := domain.JobSpec{Tenant: tenant, Workspace: "w", GPUs: gpus}
		if gpus > 1 {
			spec.GPUsPerNode = gpus
		}
		j, err := admin.SubmitJob(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		j = waitJob(t, admin, j.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
		readyAfterVRF(j)
		return j
	}

	// Every VRF on every leaf by default; the option is replicated
	// state, set through a follower.
	if o, err := admin.FabricOptions(ctx); err != nil || *o != (api.FabricOptions{VRFPlacement: "all", L3VLANMin: 3000, L3VLANMax: 4094}) {
		t.Fatalf("default options %+v, %v", o, err)
	}
	settled("all")
	for leaf, l := range drv.latest() {
		if len(l.vrfs) != len(tenants) {
			t.Fatalf("every VRF on every leaf: %s carries %v", leaf, l.vrfs)
		}
	}
	follower := c.Client((c.Leader() + 1) % 3)
	if o, err := follower.SetFabricOptions(ctx, api.FabricOptions{VRFPlacement: "used"}); err != nil || o.VRFPlacement != "used" {
		t.Fatalf("set VRFs where used through a follower: %+v, %v", o, err)
	}
	for i, s := range c.Servers {
		waitState(t, s, fmt.Sprintf("member %d has the option", i), func(f *state.FSM) bool {
			return f.FabricOptions().VRFPlacement == fabric.VRFsWhereUsed
		})
	}
	check("used, no job") // and so no VRF anywhere

	blue := ready("blue", 1)
	v1 := check("blue's job")
	blueLeaf := blue.Placement[0].Leaves[0]
	if v1[blueLeaf]["blue"] == "" {
		t.Fatalf("blue's leaf %s has no blue VRF: %v", blueLeaf, v1)
	}
	red := ready("red", 2)
	v2 := check("red's job on both leaves")
	if v2[blueLeaf]["blue"] != v1[blueLeaf]["blue"] {
		t.Fatalf("blue's L3 VLAN on %s went from %s to %s when red came", blueLeaf, v1[blueLeaf]["blue"], v2[blueLeaf]["blue"])
	}
	if _, err := admin.CancelJob(ctx, blue.ID); err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, blue.ID, "ended", func(j *domain.Job) bool { return !j.State.HoldsGPUs() })
	v3 := check("blue left")
	for _, leaf := range leaves {
		if v3[leaf]["red"] != v2[leaf]["red"] {
			t.Fatalf("red's L3 VLAN on %s went from %s to %s when blue left", leaf, v2[leaf]["red"], v3[leaf]["red"])
		}
	}

	// A leaf's range that holds what it carries is accepted; every VRF
	// on every leaf (4 tenants) in 2 VLANs is not, and changes nothing.
	if _, err := follower.SetFabricOptions(ctx, api.FabricOptions{VRFPlacement: "used", L3VLANMin: 3000, L3VLANMax: 3001}); err != nil {
		t.Fatalf("a range holding what each leaf carries: %v", err)
	}
	revBefore, eventsBefore := fabricRev(t, admin), len(requestEvents(t, admin))
	_, err = follower.SetFabricOptions(ctx, api.FabricOptions{VRFPlacement: "all", L3VLANMin: 3000, L3VLANMax: 3001})
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeFailedPrecondition || de.Field != "vrfPlacement" || !strings.Contains(de.Message, "vrfPlacement all") || !strings.Contains(de.Message, "(3000-3001) is exhausted") {
		t.Fatalf("4 VRFs on every leaf in 2 L3 VLANs: %v; want refused naming vrfPlacement and the pool", err)
	}
	if o, _ := admin.FabricOptions(ctx); o.VRFPlacement != "used" || o.L3VLANMax != 3001 || fabricRev(t, admin) != revBefore || len(requestEvents(t, admin)) != eventsBefore {
		t.Fatalf("the refused change changed the state: options %+v, revision %d (was %d)", o, fabricRev(t, admin), revBefore)
	}

	// Green comes to both leaves: 3000-3001 are in quarantine there
	// (released when every VRF but red's left the leaves, red's are
	// outside): green's job waits, saying why and naming no other
	// tenant; red's network stays.
	g, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "green", Workspace: "w", GPUs: 2, GPUsPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	g = waitJob(t, admin, g.ID, "held for an L3 VLAN", func(j *domain.Job) bool {
		return j.Reason != nil && strings.Contains(j.Reason.Message, "waiting for an L3 VLAN on leaf "+leaves[0])
	})
	greenTok := as(t, c.Servers[0].URL(), mustToken(t, admin, domain.RoleMember, "green", "w"))
	seen, err := greenTok.Job(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("green's job waits: %s", seen.Reason.Message)
	if seen.State != domain.JobPlaced || seen.Reason.Code != domain.ReasonNetwork || !strings.Contains(seen.Reason.Message, "every one of the leaf's L3 VLANs (3000-3001) is taken or in quarantine") {
		t.Fatalf("green's job as green sees it: %s %+v", seen.State, seen.Reason)
	}
	// Nothing of the others: no name, not even how many VLANs they hold.
	for _, other := range []string{"red", "blue", "idle", " held", "quarantine until"} {
		if strings.Contains(seen.Reason.Message, other) {
			t.Fatalf("green's job reason says %q of other tenants: %s", other, seen.Reason.Message)
		}
	}
	// The admin reads the pool's account in the revision.
	if cause := lastCause(t, admin); !strings.Contains(cause, `1 held for an L3 VLAN (`+leaves[0]+`: pool "l3vlan/`+leaves[0]+`" (3000-3001) is exhausted: 0 held, 0 released but still deployed, 2 in quarantine`) {
		t.Fatalf("the latest revision's cause: %s", cause)
	}
	if _, err := greenTok.FabricOptions(ctx); err == nil {
		t.Fatal("a tenant read the fabric options")
	}
	if _, err := greenTok.SetFabricOptions(ctx, api.FabricOptions{VRFPlacement: "all"}); err == nil {
		t.Fatal("a tenant set the fabric options")
	}
	check("green held")
	if r, _ := admin.Job(ctx, red.ID); r.State != domain.JobReady {
		t.Fatalf("red's job is %s while green's waits", r.State)
	}
	// The range grows: green gets its VLAN, nobody else is renumbered.
	if _, err := admin.SetFabricOptions(ctx, api.FabricOptions{VRFPlacement: "used"}); err != nil {
		t.Fatal(err)
	}
	g = waitJob(t, admin, g.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	readyAfterVRF(g)
	v4 := check("green's VLAN after the range grew")
	for _, leaf := range leaves {
		if v4[leaf]["red"] != v3[leaf]["red"] {
			t.Fatalf("red's L3 VLAN on %s went from %s to %s when green came", leaf, v3[leaf]["red"], v4[leaf]["red"])
		}
	}
}

// TestL3VLANHoldEndsWithQuarantine: with VRFs where used, a job whose
// VRF would come to a leaf whose only L3 VLAN is in quarantine waits, and
// gets its network once the quarantine ends, with nothing else changing
// (the fabric loop looks again on its tick while a job waits for an id).
func TestL3VLANHoldEndsWithQuarantine(t *testing.T) {
	drv := &sonicRecorder{}
	clk := tstime.NewFake(time.Date(2026, 11, 26, 22, 0, 0, 0, time.UTC))
	c := startTuned(t, func(cfg *server.Config) {
		cfg.Clock, cfg.Driver = clk, drv
		cfg.ScheduleInterval = 10 * time.Minute // few ticks in an hour
	})
	admin := c.Client(0)
	ctx := ctxT(t)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 1, Spines: 1, NOS: "sonic"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(topo)
	if _, err := admin.ApplyTopology(ctx, raw, false); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetFabricOptions(ctx, api.FabricOptions{VRFPlacement: "used", L3VLANMin: 3000, L3VLANMax: 3000}); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []string{"red", "blue"} {
		if _, err := admin.CreateTenant(ctx, api.TenantCreateRequest{Name: tn, Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CreateWorkspace(ctx, tn, api.WorkspaceCreateRequest{Name: "w", BorrowLimit: 1}); err != nil {
			t.Fatal(err)
		}
	}
	red := submit(t, admin, "red", "w", 1)
	waitJob(t, admin, red.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	// Both servers are on s1-leaf0, which has one L3 VLAN: red's.
	blue := submit(t, admin, "blue", "w", 1)
	waitJob(t, admin, blue.ID, "held for an L3 VLAN", func(j *domain.Job) bool {
		return j.Reason != nil && strings.Contains(j.Reason.Message, "waiting for an L3 VLAN on leaf s1-leaf0")
	})
	if cause := lastCause(t, admin); !strings.Contains(cause, `(3000-3000) is exhausted: 1 held`) {
		t.Fatalf("held for red's VLAN; the revision says %s", cause)
	}
	// Red leaves: its VLAN goes to quarantine (an hour), blue still waits.
	if _, err := admin.CancelJob(ctx, red.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c.Servers[0], "red's job out of the fabric", func(f *state.FSM) bool {
		in, _, _, err := f.FabricInput(clk.Now(), []uint64{blue.ID})
		return err == nil && len(in.Allocations) == 0 && len(f.HeldJobs()) == 1
	})
	settle := func() {
		t.Helper()
		var st api.FabricStatus
		if err := admin.Do(ctx, "POST", "/v1/fabric/deploy", nil, &st); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	j, err := admin.Job(ctx, blue.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != domain.JobPlaced || j.NetworkRev != 0 {
		t.Fatalf("blue's job got its network while the only L3 VLAN is in quarantine: %s, revision %d", j.State, j.NetworkRev)
	}
	if cause := lastCause(t, admin); !strings.Contains(cause, `(3000-3000) is exhausted: 0 held`) {
		t.Fatalf("red's VLAN released; the revision says %s", cause)
	}
	clk.Advance(time.Hour + 10*time.Minute)
	j = waitJob(t, admin, blue.ID, "Ready once the quarantine ended", func(j *domain.Job) bool { return j.State == domain.JobReady })
	if l := drv.latest()["s1-leaf0"]; l.vrfs[vrfOf("blue")] != "Vlan3000" || len(l.vrfs) != 1 {
		t.Fatalf("s1-leaf0 carries %v; want blue's VRF alone, on VLAN 3000", l.vrfs)
	}
}
