package sched

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// hostFreeByMaps is hostOf's per-GPU free milli as it was worked out
// before hostOf skipped the maps of servers without time-sliced GPUs
// (verbatim).
func hostFreeByMaps(v *server, j *domain.Job) []int {
	var out []int
	for g := range v.free {
		f := 0
		switch {
		case v.free[g]:
			f = 1000
		case v.share[g] > 0 && len(v.mig[g]) == 0 && (j.Share == 0 || v.shareTenant[g] == j.Tenant):
			f = (unit - v.share[g]) / Milli
		}
		out = append(out, f)
	}
	return out
}

// TestHostOfAsMaps compares hostOf's free milli per GPU with the map
// look-ups it skips, for jobs of whole GPUs and shares of three tenants,
// on every server after each of thousands of changes (whole GPUs, MIG
// instances and shares of several tenants placed and released): the
// equivalence tests cannot see a wrong rating, both sides reading
// hostOf. The states must include servers with one time-sliced GPU and
// with several.
func TestHostOfAsMaps(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	tenants := []*domain.Tenant{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	var one, several, asked int
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := &Snapshot{Topology: topo, Static: NewStatic(topo), Scorer: BestFit{}}
		c := buildCluster(s)
		var live []*domain.Job
		for id := uint64(1); id <= 600; id++ {
			tn := tenants[rng.IntN(len(tenants))]
			spec := domain.JobSpec{Tenant: tn.Name, Workspace: "w"}
			switch rng.IntN(3) {
			case 0:
				spec.GPUs = []int{1, 2, 4}[rng.IntN(3)]
			case 1:
				spec.GPUs, spec.Share = 1, []float64{0.25, 0.5, 0.75}[rng.IntN(3)]
			default:
				spec.MIGProfile, spec.MIGCount = "1g.10gb", 1
			}
			j := &domain.Job{ID: id, JobSpec: spec, State: domain.JobPending}
			for _, v := range c.servers {
				switch n := len(v.share); {
				case n == 1:
					one++
				case n > 1:
					several++
				}
				for _, q := range []*domain.Job{j, {JobSpec: domain.JobSpec{Tenant: "a", GPUs: 1, Share: 0.25}}, {JobSpec: domain.JobSpec{Tenant: "b", GPUs: 2}}} {
					got := slices.Clone(c.hostOf(v, q).Free)
					if want := hostFreeByMaps(v, q); !slices.Equal(got, want) {
						t.Fatalf("seed %d job %d: server %s for a job of tenant %s (share %v): hostOf %v, by the maps %v", seed, id, v.s.Name, q.Tenant, q.Share, got, want)
					}
					asked++
				}
			}
			if pl, _, _ := c.placeIn(j, tn, nil); pl != nil && rng.IntN(4) != 0 {
				c.commit(j, tn, pl)
				j.Placement = pl
				live = append(live, j)
			}
			if len(live) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(live))
				c.release(live[k])
				live = append(live[:k], live[k+1:]...)
			}
		}
	}
	if one < 100 || several < 100 {
		t.Fatalf("servers with one time-sliced GPU %d times, with several %d: not the states this test is for", one, several)
	}
	t.Logf("%d hosts compared; servers with one time-sliced GPU %d times, with several %d", asked, one, several)
}
