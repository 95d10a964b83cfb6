package sched

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestMIGRoomAsScan asks the base cluster's kept sets of servers with room
// in MIG mode (migRoom, from mig.Place's answers kept per cycle by layout:
// migPlace) and a scan of every GPU (mig.Place) which servers
// could take one more instance of each profile, after each of thousands of
// changes (MIG jobs of several profiles and counts, whole GPUs, placements
// committed and released, server-isolated tenants), and asks placeMIG of
// the base cluster and of the same cluster by full scans the same jobs:
// placement, level and reason must be the same. The states must include
// full servers in MIG mode with no room for a profile (the ones the kept
// set lets placeMIG pass over) and full servers in MIG mode with room.
func TestMIGRoomAsScan(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	tenants := []*domain.Tenant{
		{Name: "a", Isolation: domain.IsolationGPU},
		{Name: "b", Isolation: domain.IsolationServer},
		{Name: "c", Isolation: domain.IsolationGPU},
	}
	profiles := []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
	var passedOver, fullWithRoom, asked int
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 18))
		s := &Snapshot{Topology: topo, Static: NewStatic(topo)}
		ex := *s
		ex.exhaustive = true
		fast, full := buildCluster(s), buildCluster(&ex)
		var live []*domain.Job
		for id := uint64(1); id <= 300; id++ {
			tn := tenants[rng.IntN(len(tenants))]
			spec := domain.JobSpec{Tenant: tn.Name, Workspace: "w"}
			if rng.IntN(4) == 0 {
				spec.GPUs = []int{1, 2, 4}[rng.IntN(3)]
			} else {
				spec.MIGProfile, spec.MIGCount = profiles[rng.IntN(len(profiles))], 1+rng.IntN(3)
			}
			j := &domain.Job{ID: id, JobSpec: spec, State: domain.JobPending}
			var pl []domain.Placement
			if spec.MIGProfile != "" {
				// The kept sets against a scan of every GPU in MIG mode.
				for _, p := range profiles {
					got := fast.migRoom(p)
					for i, v := range full.servers {
						want := false
						for _, ins := range v.mig {
							if _, err := mig.Place(mig.Layout{Model: v.s.GPUModel, Instances: ins}, p); len(ins) > 0 && err == nil {
								want = true
							}
						}
						if in := got[i>>6]&(1<<(i&63)) != 0; in != want {
							t.Fatalf("seed %d job %d: server %d in the kept set for %s: %v, by a scan %v", seed, id, i, p, in, want)
						}
						if len(v.mig) > 0 && v.nfree == 0 && p == spec.MIGProfile {
							if want {
								fullWithRoom++
							} else {
								passedOver++
							}
						}
					}
				}
				gotPl, gotLevel, gotR := fast.placeMIG(j, tn)
				wantPl, wantLevel, wantR := full.placeMIG(j, tn)
				asked++
				if !reflect.DeepEqual(gotPl, wantPl) || gotLevel != wantLevel || gotR != wantR {
					t.Fatalf("seed %d job %d (%d x %s, tenant %s): kept sets %v %q %+v, full scans %v %q %+v",
						seed, id, spec.MIGCount, spec.MIGProfile, tn.Name, gotPl, gotLevel, gotR, wantPl, wantLevel, wantR)
				}
				pl = wantPl
			} else {
				pl, _, _ = full.placeIn(j, tn, nil)
			}
			live = commitAndRelease(rng, fast, full, live, j, tn, pl)
		}
	}
	if passedOver < 100 || fullWithRoom < 100 {
		t.Fatalf("%d MIG jobs asked; full servers in MIG mode without room for the job's profile %d, with room %d: not the states this test is for", asked, passedOver, fullWithRoom)
	}
	t.Logf("%d MIG jobs asked; full servers in MIG mode passed over %d times, with room %d times", asked, passedOver, fullWithRoom)
}

// TestHeldByOthersAsScan asks the base cluster's kept set of servers a
// server-isolated tenant holds (heldByOthers, from the log of touched
// servers) and a scan of every server which servers a job may not use for
// that reason, after each of thousands of changes (whole GPUs and MIG
// instances of GPU- and server-isolated tenants, placements committed and
// released), and asks placeMIG, which passes over that set, of the base
// cluster and of the same cluster by full scans the same jobs: placement,
// level and reason must be the same. One tenant is asked for as
// GPU-isolated while its jobs, committed as server-isolated, hold servers
// exclusively: those stay its own, so no set may be kept for it. The
// states must include servers the walk passes over that have room.
func TestHeldByOthersAsScan(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 8, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	tenants := []*domain.Tenant{
		{Name: "a", Isolation: domain.IsolationGPU},
		{Name: "b", Isolation: domain.IsolationServer},
		{Name: "c", Isolation: domain.IsolationGPU},
		{Name: "d", Isolation: domain.IsolationServer},
	}
	// d's jobs as a GPU-isolated tenant's: eligible on d's own servers.
	dAsGPU := &domain.Tenant{Name: "d", Isolation: domain.IsolationGPU}
	profiles := []string{"1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"}
	var passed, ownKept, asked int
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 81))
		s := &Snapshot{Topology: topo, Static: NewStatic(topo)}
		ex := *s
		ex.exhaustive = true
		fast, full := buildCluster(s), buildCluster(&ex)
		var live []*domain.Job
		for id := uint64(1); id <= 400; id++ {
			tn := tenants[rng.IntN(len(tenants))]
			spec := domain.JobSpec{Tenant: tn.Name, Workspace: "w"}
			if rng.IntN(3) == 0 {
				spec.GPUs = []int{1, 2, 4}[rng.IntN(3)]
			} else {
				spec.MIGProfile, spec.MIGCount = profiles[rng.IntN(len(profiles))], 1+rng.IntN(2)
			}
			j := &domain.Job{ID: id, JobSpec: spec, State: domain.JobPending}
			var pl []domain.Placement
			if spec.MIGProfile != "" {
				asking := tn
				if tn == tenants[3] && rng.IntN(2) == 0 {
					asking = dAsGPU
				}
				// Every profile's set reads the log first, as placeMIG's
				// migRoom does before heldByOthers: the log may start
				// again only once the held set has read it too.
				for _, p := range profiles {
					fast.migRoom(p)
				}
				// The kept set against a scan of every server.
				got := fast.heldByOthers(j, asking)
				own := false
				for _, v := range full.servers {
					own = own || v.exclusive == j.Tenant
				}
				switch {
				case asking.Isolation == domain.IsolationServer || own:
					if got != nil {
						t.Fatalf("seed %d job %d: a set kept for tenant %s (%s, holds a server exclusively: %v)", seed, id, asking.Name, asking.Isolation, own)
					}
					if own && asking.Isolation != domain.IsolationServer {
						ownKept++
					}
				default:
					if got == nil {
						t.Fatalf("seed %d job %d: no set kept for GPU-isolated tenant %s, which holds no server exclusively", seed, id, asking.Name)
					}
					for i, v := range full.servers {
						want := v.exclusive != "" && v.exclusive != j.Tenant
						if in := got[i>>6]&(1<<(i&63)) != 0; in != want {
							t.Fatalf("seed %d job %d: server %d in the kept set: %v, by a scan %v (exclusive %q)", seed, id, i, in, want, v.exclusive)
						}
						if want && (v.nfree > 0 || len(v.mig) > 0) {
							passed++
						}
					}
				}
				gotPl, gotLevel, gotR := fast.placeMIG(j, asking)
				wantPl, wantLevel, wantR := full.placeMIG(j, asking)
				asked++
				if !reflect.DeepEqual(gotPl, wantPl) || gotLevel != wantLevel || gotR != wantR {
					t.Fatalf("seed %d job %d (%d x %s, tenant %s %s): kept sets %v %q %+v, full scans %v %q %+v",
						seed, id, spec.MIGCount, spec.MIGProfile, asking.Name, asking.Isolation, gotPl, gotLevel, gotR, wantPl, wantLevel, wantR)
				}
				pl = wantPl
			} else {
				pl, _, _ = full.placeIn(j, tn, nil)
			}
			live = commitAndRelease(rng, fast, full, live, j, tn, pl)
		}
	}
	if passed < 1000 || ownKept < 20 {
		t.Fatalf("%d MIG jobs asked; servers with room passed over %d times, a GPU-isolated ask of a tenant holding servers exclusively %d times: not the states this test is for", asked, passed, ownKept)
	}
	t.Logf("%d MIG jobs asked; servers with room passed over %d times; a GPU-isolated ask of a tenant holding servers exclusively %d times", asked, passed, ownKept)
}

// commitAndRelease commits pl (most of the time) to both clusters and
// releases a random live job from both now and then: the kept sets and the
// full scans see the same changes.
func commitAndRelease(rng *rand.Rand, fast, full *cluster, live []*domain.Job, j *domain.Job, tn *domain.Tenant, pl []domain.Placement) []*domain.Job {
	if pl != nil && rng.IntN(5) != 0 {
		fast.commit(j, tn, pl)
		full.commit(j, tn, pl)
		j.Placement = pl
		live = append(live, j)
	}
	if len(live) > 0 && rng.IntN(3) == 0 {
		k := rng.IntN(len(live))
		fast.release(live[k])
		full.release(live[k])
		live = append(live[:k], live[k+1:]...)
	}
	return live
}
