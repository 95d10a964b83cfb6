package fabric_test

import (
	"fmt"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// largeInput is the scale: 256 leaves (32 stripes of 8 rails), 16
// spines, 1,024 servers, 1,000 tenants (a third segmented), one job per
// GPU-isolated GPU or server-isolated server until the GPUs run out.
func largeInput(b *testing.B) fabric.Input {
	top, err := topology.Generate(topology.GenerateOptions{Stripes: 32, ServersPerStripe: 32, GPUsPerServer: 8, Spines: 16})
	if err != nil {
		b.Fatal(err)
	}
	in := fabric.Input{Topology: top, IDs: fabric.IDs{Tenants: map[string]fabric.TenantIDs{}}}
	for i := range 1000 {
		t := domain.Tenant{Name: fmt.Sprintf("t%04d", i), Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5, JobSegmentation: i%3 == 0}
		if i%2 == 1 {
			t.Isolation = domain.IsolationServer
		}
		in.Tenants = append(in.Tenants, t)
		in.IDs.Tenants[t.Name] = fabric.TenantIDs{L3VNI: uint32(10000 + i), VRFID: uint16(1 + i), L3VLAN: uint16(3000 + i%1000), UnclassifiedGroup: uint16(60000 + i)}
	}
	job := 0
	for s, srv := range top.Servers() {
		t := in.Tenants[s%len(in.Tenants)]
		if t.Isolation == domain.IsolationServer {
			job++
			in.Allocations = append(in.Allocations, fabric.Allocation{Tenant: t.Name, Server: srv.Name, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Whole: true, JobID: fmt.Sprint(job)})
			if t.JobSegmentation {
				in.Groups = append(in.Groups, fabric.Group{Tenant: t.Name, Name: "job-" + fmt.Sprint(job), ID: uint16(job), JobID: fmt.Sprint(job)})
			}
			continue
		}
		for g := range 8 {
			job++
			in.Allocations = append(in.Allocations, fabric.Allocation{Tenant: t.Name, Server: srv.Name, GPUs: []int{g}, JobID: fmt.Sprint(job)})
			if t.JobSegmentation {
				in.Groups = append(in.Groups, fabric.Group{Tenant: t.Name, Name: "job-" + fmt.Sprint(job), ID: uint16(job), JobID: fmt.Sprint(job)})
			}
		}
	}
	return in
}

func BenchmarkCompileLarge(b *testing.B) {
	for _, placement := range []fabric.VRFPlacement{fabric.VRFsOnAllLeaves, fabric.VRFsWhereUsed} {
		b.Run(string(placement), func(b *testing.B) {
			in := largeInput(b)
			in.Options.VRFPlacement = placement
			b.ResetTimer()
			for b.Loop() {
				if _, err := fabric.Compile(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
