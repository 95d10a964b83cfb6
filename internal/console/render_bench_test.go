package console

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// BenchmarkClusterRender is the server's share of the cluster page of
// 2,048 servers (32 stripes x 64 x 8 GPUs), two thirds held by 1,500
// 8-GPU jobs of ten tenants: building the grid from the API's answers and
// executing the template (what every refresh of an open page costs the
// server, the API's own work aside).
func BenchmarkClusterRender(b *testing.B) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 32, ServersPerStripe: 64, GPUsPerServer: 8})
	if err != nil {
		b.Fatal(err)
	}
	var jobs []domain.Job
	var tenants []domain.Tenant
	for i := range 10 {
		tenants = append(tenants, domain.Tenant{Name: fmt.Sprintf("tenant%d", i)})
	}
	i := 0
	for _, s := range topo.Sites[0].Fabrics[0].Servers {
		if i%3 == 2 {
			i++
			continue
		}
		jobs = append(jobs, domain.Job{ID: uint64(i + 1), State: domain.JobRunning, JobSpec: domain.JobSpec{Name: fmt.Sprintf("train-%d", i), Tenant: tenants[i%10].Name, Workspace: "main", GPUs: 8},
			Placement: []domain.Placement{{Server: s.Name, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}})
		i++
	}
	var nodes []domain.NodeView
	for _, srv := range topo.Sites[0].Fabrics[0].Servers {
		nodes = append(nodes, domain.NodeView{Name: srv.Name, Site: "dc1", Fabric: "fabric1", Stripe: srv.Stripe, GPUModel: srv.GPUModel, GPUs: srv.GPUs,
			Leaves: []string{"leaf0", "leaf1", "leaf2", "leaf3", "leaf4", "leaf5", "leaf6", "leaf7"}})
	}
	c, err := New(Config{API: http.NotFoundHandler(), Clock: tstime.Std{}})
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	b.ResetTimer()
	for range b.N {
		v := &clusterView{}
		col := colours(tenants)
		buildFull(v, nodes, jobs, col)
		buf.Reset()
		if err := c.pages["cluster"].ExecuteTemplate(&buf, "page", view{Title: "Cluster", Nav: "cluster", Who: &domain.Token{Role: domain.RoleAdmin}, Data: v}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len())/1024, "html-KiB")
}
