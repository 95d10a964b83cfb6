package sched

import (
	"fmt"
	"math"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestShapeKeyAsFmt checks shapeKey, built by hand, against the fmt format
// it replaced: the noFit and failure caches key on it, so two jobs must
// share a key exactly when their fields do.
func TestShapeKeyAsFmt(t *testing.T) {
	viaFmt := func(j *domain.Job) string {
		k := fmt.Sprintf("%s|%d|%d|%s|%d|%g|%s|%v|%s", j.Tenant, j.GPUs, j.GPUsPerNode, j.MIGProfile, j.MIGCount, j.Share, j.GPUModel, j.GPUModels, j.MinDriver+"="+j.Driver)
		if t := j.Topology; t != nil {
			k += fmt.Sprintf("|%s|%t", t.Level, t.Required)
		}
		if j.Pool != "" {
			k += "|pool=" + j.Pool
		}
		return k
	}
	specs := []domain.JobSpec{
		{},
		{Tenant: "acme", GPUs: 64, GPUsPerNode: 8},
		{Tenant: "a|b", GPUs: -1, MIGProfile: "3g.40gb", MIGCount: 2},
		{Tenant: "t", Share: 0.25},
		{Tenant: "t", Share: 1.0 / 3},
		{Tenant: "t", Share: 1e-7},
		{Tenant: "t", Share: 123456789},
		{Tenant: "t", Share: math.Inf(1)},
		{Tenant: "t", GPUModel: "H100", GPUModels: []string{"H100", "A100 80GB"}, MinDriver: "550.54", Driver: "550.90"},
		{Tenant: "t", GPUModels: []string{}},
		{Tenant: "t", GPUs: 16, Topology: &domain.TopologyRequirement{Level: domain.TopologyStripe, Required: true}},
		{Tenant: "t", Topology: &domain.TopologyRequirement{}},
		{Tenant: "t", GPUs: 8, Pool: "slurm:c1:a100"},
		{Tenant: "t", GPUs: 8, Topology: &domain.TopologyRequirement{Level: domain.TopologyLeaf}, Pool: "p"},
	}
	for _, spec := range specs {
		j := &domain.Job{JobSpec: spec}
		if got, want := shapeKey(j), viaFmt(j); got != want {
			t.Errorf("shapeKey(%+v) = %q, fmt gives %q", spec, got, want)
		}
	}
}

// TestShapeOfAsShapeKey: the cycle's shapeKey of the job being decided
// (shapeOf, asked by the step, reclaim and backfill) is shapeKey of the
// job asked, over a queue where jobs come back (a job asked again after
// others) and jobs of one shape differ: it fails if the kept key is
// returned for another job.
func TestShapeOfAsShapeKey(t *testing.T) {
	jobs := []*domain.Job{
		{ID: 1, JobSpec: domain.JobSpec{Tenant: "a", GPUs: 8}},
		{ID: 2, JobSpec: domain.JobSpec{Tenant: "a", GPUs: 8}},
		{ID: 3, JobSpec: domain.JobSpec{Tenant: "b", GPUs: 16, GPUsPerNode: 8}},
		{ID: 4, JobSpec: domain.JobSpec{Tenant: "a", Share: 0.5}},
	}
	st := &cycle{}
	for k, i := range []int{0, 0, 1, 2, 2, 0, 3, 1, 3, 3, 2} {
		if got, want := st.shapeOf(jobs[i]), shapeKey(jobs[i]); got != want {
			t.Fatalf("ask %d (job %d): shapeOf = %q, shapeKey = %q", k, jobs[i].ID, got, want)
		}
	}
}
