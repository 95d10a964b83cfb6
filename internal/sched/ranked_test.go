package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestRankedAsScan asks the ranked servers (ranked.go) and the scan they
// stand in for the same question after every change of a small cluster:
// thousands of placements and releases of whole GPUs, shares of several
// tenants, CPU and memory requests, GPU- and server-isolated tenants, GPUs
// hidden and shown as placeAround hides reserved ones; under the default
// policy and under BestFit, whose integer ratings tie often (the scan
// keeps the first server of the best rating); jobs of two pools and of
// none. The log of touched servers
// is compacted many times over on the way.
func TestRankedAsScan(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 8, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, scorer := range []Scorer{nil, BestFit{}} {
		for seed := uint64(1); seed <= 4; seed++ {
			rng := rand.New(rand.NewPCG(seed, 11))
			// Two pools: every third server, and the first stripe; a
			// pool job's tree holds its pool's servers only.
			pools := map[string]*domain.ServerPool{"thirds": {Name: "thirds"}, "first": {Name: "first"}}
			for i, v := range topo.Servers() {
				if i%3 == 1 {
					pools["thirds"].Servers = append(pools["thirds"].Servers, v.Name)
				}
				if i < 8 {
					pools["first"].Servers = append(pools["first"].Servers, v.Name)
				}
			}
			s := &Snapshot{Topology: topo, Scorer: scorer, Tenants: map[string]*domain.Tenant{}, Pools: pools}
			var tenants []*domain.Tenant
			for i := 0; i < 6; i++ {
				tn := &domain.Tenant{Name: fmt.Sprintf("t%d", i), Isolation: domain.IsolationGPU}
				if i%3 == 0 {
					tn.Isolation = domain.IsolationServer
				}
				s.Tenants[tn.Name] = tn
				tenants = append(tenants, tn)
			}
			spec := func() *domain.Job {
				tn := tenants[rng.IntN(len(tenants))]
				j := &domain.Job{JobSpec: domain.JobSpec{Tenant: tn.Name, Workspace: "w"}, State: domain.JobPending}
				switch rng.IntN(4) {
				case 0:
					j.Share = []float64{0.25, 0.5}[rng.IntN(2)]
				default:
					j.GPUs = []int{1, 2, 4, 8}[rng.IntN(4)]
				}
				if rng.IntN(4) == 0 {
					j.CPUMilli = 1000
				}
				j.Pool = []string{"", "", "thirds", "first"}[rng.IntN(4)]
				return j
			}
			// The policy weighs the shapes of the live jobs.
			for i := 0; i < 20; i++ {
				s.Jobs = append(s.Jobs, spec())
			}
			c := buildCluster(s)
			if !c.sc.active() || !c.sc.cached {
				t.Fatal("no cached scorer: nothing ranked")
			}
			var running []*domain.Job
			var hidden []gpuRef
			asked := 0
			for step := 0; step < 3000; step++ {
				j := spec()
				tn := s.Tenants[j.Tenant]
				r := request(j)
				row := c.sc.rowOf(c.sc.shapeID(j, nil))
				want, wantGPU := c.scanScored(j, j, tn, nil, r, row)
				got, gotGPU, ok := c.ranked(j, j, tn, nil, r)
				if !ok {
					t.Fatalf("seed %d step %d: the base cluster did not rank", seed, step)
				}
				asked++
				if got != want || (want != nil && gotGPU != wantGPU) {
					t.Fatalf("%T seed %d step %d: %+v of %s: ranked %v GPU %d, scan %v GPU %d", scorer, seed, step, j.JobSpec, tn.Isolation, name(got), gotGPU, name(want), wantGPU)
				}
				// Compacted before a change is logged: one entry past the
				// threshold at most.
				if n := len(c.rank.log); n > 1025 && n > 4*len(c.servers)+2 {
					t.Fatalf("step %d: the log of touched servers holds %d entries: not compacted", step, n)
				}
				switch x := rng.IntN(10); {
				case x < 5 && want != nil:
					pl, _, _ := c.placeScored(j, tn, nil)
					j.Placement = pl
					c.commit(j, tn, pl)
					running = append(running, j)
				case x < 8 && len(running) > 0:
					k := rng.IntN(len(running))
					c.release(running[k])
					running = append(running[:k], running[k+1:]...)
				case x == 8 && len(hidden) == 0:
					// Hide a server's free GPUs, as placeAround hides reserved ones.
					v := c.servers[rng.IntN(len(c.servers))]
					for g, f := range v.free {
						if f {
							v.free[g] = false
							v.nfree--
							v.ver++
							hidden = append(hidden, gpuRef{v.idx, g})
							c.touched(v.idx)
						}
					}
				case x == 9:
					for _, g := range hidden {
						v := c.servers[g.server]
						v.free[g.gpu] = true
						v.nfree++
						v.ver++
						c.touched(g.server)
					}
					hidden = hidden[:0]
				}
			}
			if asked == 0 {
				t.Fatal("nothing asked")
			}
		}
	}
}

func name(v *server) string {
	if v == nil {
		return "none"
	}
	return v.s.Name
}

// TestPlacerRankedAsScanAcrossWeighing: a Placer weighs its JobFabric
// shapes again as the cluster fills (epochs), which changes every server's
// rating; its ranked trees must follow, or they answer with the old
// weights. The same jobs placed and released through a Placer that ranks
// and one that scans land alike. It failed when reweigh dropped the score
// cache but kept the trees.
func TestPlacerRankedAsScanAcrossWeighing(t *testing.T) {
	const gib = 1024
	var servers []domain.Server
	for i := range 64 {
		s := domain.Server{Name: fmt.Sprintf("n%02d", i), GPUModel: "G2", GPUs: 8, CPUMilli: 96000, MemoryMiB: 384 * gib}
		if i%8 == 0 {
			s.GPUModel, s.CPUMilli, s.MemoryMiB = "G3", 128000, 768*gib
		}
		servers = append(servers, s)
	}
	topo := &domain.Topology{Sites: []domain.Site{{Name: "s", Fabrics: []domain.Fabric{{Name: "f", Servers: servers}}}}}
	shapes := []Shape{
		{CPUMilli: 12000, MemoryMiB: 48 * gib, GPUs: 1, Milli: 1000, Freq: 0.5},
		{CPUMilli: 30000, MemoryMiB: 150 * gib, GPUs: 2, Milli: 1000, Freq: 0.2},
		{CPUMilli: 60000, MemoryMiB: 313 * gib, GPUs: 4, Milli: 1000, Freq: 0.2},
		{CPUMilli: 120000, MemoryMiB: 720 * gib, GPUs: 8, Milli: 1000, Freq: 0.1},
	}
	ranked := NewPlacer(&Snapshot{Topology: topo, Scorer: NewJobFabric(shapes)})
	scanning := NewPlacer(&Snapshot{Topology: topo, Scorer: NewJobFabric(shapes)})
	// A following Placer scans (NewPlacer); the trees are put back on
	// one of them to check they follow the weighing all the same.
	ranked.c.rank = nil
	scanning.c.rank = &ranking{off: true}
	rng := rand.New(rand.NewPCG(5, 9))
	var live []*domain.Job
	for i := range 600 {
		sh := shapes[rng.IntN(len(shapes))]
		j := &domain.Job{ID: uint64(i + 1), JobSpec: domain.JobSpec{Tenant: "t", Workspace: "w", GPUs: sh.GPUs, CPUMilli: sh.CPUMilli, MemoryMiB: sh.MemoryMiB}}
		got, _ := ranked.Place(j)
		want, _ := scanning.Place(j)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("job %d (%d GPUs): ranked %v, scanned %v", j.ID, j.GPUs, got, want)
		}
		if got != nil {
			j.Placement = got
			live = append(live, j)
		}
		if len(live) > 0 && rng.IntN(3) == 0 {
			k := rng.IntN(len(live))
			ranked.Release(live[k])
			scanning.Release(live[k])
			live = slices.Delete(live, k, k+1)
		}
	}
}
