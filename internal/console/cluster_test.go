package console

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestGridDrawsSlicesAndShares: a whole-GPU job colours its GPUs; MIG
// slices sit at their memory slots inside their GPU, shares side by side
// by their fraction; a tenant's view marks the GPUs it may not see.
func TestGridDrawsSlicesAndShares(t *testing.T) {
	jobs := []domain.Job{
		{ID: 1, JobSpec: domain.JobSpec{Tenant: "acme"}, Placement: []domain.Placement{{Server: "s1", GPUs: []int{0, 1}}}},
		{ID: 2, JobSpec: domain.JobSpec{Tenant: "globex", GPUModel: "H100-80GB"}, Placement: []domain.Placement{{Server: "s1", GPUs: []int{3},
			MIG: []domain.MIGSlice{{GPU: 3, Profile: "3g.40gb", Start: 4}, {GPU: 3, Profile: "1g.10gb", Start: 0}}}}},
		{ID: 3, JobSpec: domain.JobSpec{Tenant: "globex"}, Placement: []domain.Placement{{Server: "s1", GPUs: []int{5}, Share: 0.5}}},
		{ID: 4, JobSpec: domain.JobSpec{Tenant: "globex"}, Placement: []domain.Placement{{Server: "s1", GPUs: []int{5}, Share: 0.25}}},
	}
	col := map[string]string{"acme": "t0", "globex": "t1"}
	v := &clusterView{}
	buildOwn(v, jobs, col)
	if len(v.Stripes) != 1 || len(v.Stripes[0].Servers) != 1 {
		t.Fatalf("stripes: %+v", v.Stripes)
	}
	g := v.Stripes[0].Servers[0].GPUs
	if len(g) != 6 {
		t.Fatalf("%d GPUs drawn, want 6 (up to the highest index held)", len(g))
	}
	x := func(i int) float64 { return float64(pad + i*(cell+gap)) }
	if g[0].Job != 1 || g[0].Class != "t0" || g[1].Job != 1 {
		t.Errorf("whole GPUs: %+v %+v", g[0], g[1])
	}
	if g[2].Class != "unk" || g[4].Class != "unk" {
		t.Errorf("GPUs the caller does not hold: %q %q, want unk", g[2].Class, g[4].Class)
	}
	want3 := []partView{{X: x(3) + 5, W: 5 - sliver, Class: "t1", Job: 2}, {X: x(3), W: 1.25 - sliver, Class: "t1", Job: 2}}
	if len(g[3].Parts) != 2 || g[3].Parts[0] != want3[0] || g[3].Parts[1] != want3[1] {
		t.Errorf("MIG slices: %+v, want %+v", g[3].Parts, want3)
	}
	want5 := []partView{{X: x(5), W: 5 - sliver, Class: "t1", Job: 3}, {X: x(5) + 5, W: 2.5 - sliver, Class: "t1", Job: 4}}
	if len(g[5].Parts) != 2 || g[5].Parts[0] != want5[0] || g[5].Parts[1] != want5[1] {
		t.Errorf("shares: %+v, want %+v", g[5].Parts, want5)
	}
	if v.UsedGPUs != 4 {
		t.Errorf("GPUs held: %d, want 4", v.UsedGPUs)
	}
}
