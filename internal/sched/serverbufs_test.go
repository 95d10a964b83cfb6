package sched

import (
	"reflect"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestServerBufsAsNew makes the horizon's empty view in one serverBufs
// cycle after cycle, as a Carry does, each time after writing into the
// last one what a cycle writes (GPUs taken whole, by share and by MIG
// instance, holders, isolation, CPU, memory, change count), and compares
// every server with one made in new arrays. It fails when the free GPUs
// are not set again on reuse, and when a server's struct is not
// overwritten whole (its holders or maps kept); each tried.
func TestServerBufsAsNew(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 6, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	st := NewStatic(topo)
	var kept serverBufs
	for cycle := range 4 {
		got := kept.empty(st)
		var fresh serverBufs
		want := fresh.empty(st)
		if len(got) != len(want) {
			t.Fatalf("cycle %d: %d servers, want %d", cycle, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.idx != i || g.static != w.static || !reflect.DeepEqual(g.free, w.free) || g.nfree != w.nfree ||
				len(g.holders) != 0 || cap(g.holders) != 1 || g.exclusive != "" || g.mig != nil || g.share != nil || g.shareTenant != nil ||
				g.cpuUsed != 0 || g.memUsed != 0 || g.ver != 0 || g.cpuCap != w.cpuCap || g.memCap != w.memCap || g.model != w.model || g.sigID != w.sigID {
				t.Fatalf("cycle %d: server %d made in kept arrays %+v, want %+v", cycle, i, *g, *w)
			}
		}
		// What a cycle writes into its view, on every other server.
		for i, v := range got {
			if i%2 == 1 {
				continue
			}
			v.take(domain.Placement{Server: v.s.Name, GPUs: []int{0, 1}}, "a")
			v.take(domain.Placement{Server: v.s.Name, GPUs: []int{2}, Share: 0.25}, "b")
			v.take(domain.Placement{Server: v.s.Name, MIG: []domain.MIGSlice{{GPU: 3, Profile: "1g.10gb"}}}, "c")
			v.hold("a", true)
			v.hold("b", false)
			v.cpuUsed, v.memUsed, v.ver = 1000, 2048, 3
		}
	}
}
