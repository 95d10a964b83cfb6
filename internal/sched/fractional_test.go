package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
)

func (w *world) migJob(ref, profile string, count int) *world {
	t, n, _ := strings.Cut(ref, "/")
	w.s.Jobs = append(w.s.Jobs, &domain.Job{ID: w.next, JobSpec: domain.JobSpec{Tenant: t, Workspace: n, MIGProfile: profile, MIGCount: count}, State: domain.JobPending})
	w.next++
	return w
}

func (w *world) shareJob(ref string, share float64) *world {
	t, n, _ := strings.Cut(ref, "/")
	w.s.Jobs = append(w.s.Jobs, &domain.Job{ID: w.next, JobSpec: domain.JobSpec{Tenant: t, Workspace: n, Share: share}, State: domain.JobPending})
	w.next++
	return w
}

// apply commits a plan's placements to the world, as the leader would.
func (w *world) apply(p *Plan) *world {
	for _, pl := range p.Placements {
		for _, j := range w.s.Jobs {
			if j.ID == pl.JobID {
				j.State, j.Placement = domain.JobReady, pl.Placement
			}
		}
	}
	return w
}

func renderFrac(p *Plan) map[uint64]string {
	out := render(p)
	for _, pl := range p.Placements {
		var parts []string
		for _, x := range pl.Placement {
			for _, s := range x.MIG {
				parts = append(parts, x.Server+":"+ints([]int{s.GPU})+"/"+s.Profile+"@"+ints([]int{s.Start}))
			}
			if x.Share > 0 {
				parts = append(parts, x.Server+":"+ints(x.GPUs)+"x"+strings.TrimPrefix(fmtFloat(x.Share), "0"))
			}
		}
		if len(parts) > 0 {
			out[pl.JobID] = strings.Join(parts, " ")
		}
	}
	return out
}

func fmtFloat(f float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", f), "0"), ".")
}

func TestMIGAndShares(t *testing.T) {
	w := newWorld(t, dgx(1, 1)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
		ws("a/w", 8, 0, 8, 1).ws("b/w", 0, 8, 0, 1)
	// Round 1: a 4g and a 3g fill GPU 0 in its real geometry (starts 0 and 4).
	w.migJob("a/w", "4g.40gb", 1).migJob("b/w", "3g.40gb", 1)
	plan := Schedule(w.s, now)
	got := renderFrac(plan)
	if got[1] != "s1-gpu001:0/4g.40gb@0" || got[2] != "s1-gpu001:0/3g.40gb@4" {
		t.Fatalf("round 1: %v", got)
	}
	w.apply(plan)
	// Round 2: GPU 0 is full (7 of 7 slices): a new 1g goes to GPU 1.
	// Shares: a's 0.25 and 0.5 share one GPU, b's share never joins it.
	w.migJob("a/w", "1g.10gb", 1).shareJob("a/w", 0.25).shareJob("a/w", 0.5).shareJob("b/w", 0.5)
	plan = Schedule(w.s, now)
	got = renderFrac(plan)
	want := map[uint64]string{3: "s1-gpu001:1/1g.10gb@0", 4: "s1-gpu001:2x.25", 5: "s1-gpu001:2x.5", 6: "s1-gpu001:3x.5"}
	for id, wv := range want {
		if got[id] != wv {
			t.Errorf("round 2 job %d: %q, want %q", id, got[id], wv)
		}
	}
	w.apply(plan)
	// Quota is counted exactly: a holds 4/7 + 1/7 + 0.75 GPUs.
	u := buildUsage(w.s, buildCluster(w.s))
	if want := 4000 + 1000 + 5250; u.usedOf("a/w") != want {
		t.Errorf("a/w uses %d units, want %d", u.usedOf("a/w"), want)
	}
	// An impossible MIG request explains itself.
	w.migJob("b/w", "7g.80gb", 5)
	plan = Schedule(w.s, now)
	if r := plan.Pending[7]; r.Code != ReasonCapacity || !strings.Contains(r.Message, "geometry") {
		t.Errorf("5 x 7g.80gb with 4 GPUs wholly free: %+v", r)
	}
	// Every MIG layout the scheduler built is one the GPU can create.
	c := buildCluster(w.s)
	for _, v := range c.servers {
		for g, l := range v.mig {
			if len(l) > 0 {
				if err := mig.Validate(mig.Layout{Model: v.s.GPUModel, Instances: l}); err != nil {
					t.Errorf("GPU %d of %s: %v", g, v.s.Name, err)
				}
			}
		}
	}
}
