package sched

import (
	"fmt"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestStaticsAsEligible asks the cycle's kept static sets (statics.of,
// by a key not built for jobs that name no model, driver or site) and
// staticEligible server by server the same question for jobs and tenants
// of every combination of GPU model, minimum and exact driver and sites,
// asked in turns (the last job's set is remembered, so the same job is
// never asked twice in a row): which servers may the job ever use.
func TestStaticsAsEligible(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	s := &Snapshot{Topology: topo, Static: NewStatic(topo)}
	c := buildCluster(s)
	model := c.servers[0].s.GPUModel
	site := c.servers[0].site
	driver := c.servers[0].s.Driver
	var jobs []*domain.Job
	var tenants []*domain.Tenant
	for _, m := range []string{"", model, "no-such-model"} {
		for _, d := range []string{"", driver, "999.0"} {
			for _, sites := range [][]string{nil, {}, {site}, {"no-such-site"}, {"no-such-site", site}} {
				for _, exact := range []bool{false, true} {
					j := &domain.Job{ID: uint64(len(jobs) + 1), JobSpec: domain.JobSpec{Tenant: "t", Workspace: "w", GPUs: 1, GPUModel: m}}
					if exact {
						j.Driver = d
					} else {
						j.MinDriver = d
					}
					jobs = append(jobs, j)
					tenants = append(tenants, &domain.Tenant{Name: "t", Sites: sites})
				}
			}
		}
	}
	for round := 0; round < 2; round++ {
		for k, j := range jobs {
			tn := tenants[k]
			set := c.statics.of(c, j, tn)
			size := 0
			for i, v := range c.servers {
				want := v.staticEligible(j, tn, c.nodes)
				if set.ok[i] != want {
					t.Fatalf("job %s (model %q, min driver %q, driver %q, sites %q): server %s in the kept set %v, staticEligible %v",
						fmt.Sprint(j.ID), j.GPUModel, j.MinDriver, j.Driver, tn.Sites, v.s.Name, set.ok[i], want)
				}
				if want {
					size = max(size, len(v.free))
				}
			}
			if set.size != size {
				t.Fatalf("job %d: kept largest server %d, by a scan %d", j.ID, set.size, size)
			}
		}
	}
}
