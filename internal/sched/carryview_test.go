package sched_test

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestCarryViewAsBuilt drives a cluster through cycles as the leader does
// and compares, before and after every cycle, the cluster view a Carry
// keeps (patched by the jobs that changed) with one built from every job:
// each server's free GPUs, MIG instances, shares and their tenant,
// holders in order, isolation, CPU and memory used, change count, and the
// totals. Every kind of change comes: placements, ends, preemptions,
// requeues (commitByCopy), shares and MIG instances, a tenant turned
// server-isolated and back, a node cordoned with jobs on it and
// uncordoned, and the topology replaced. After the cycle, the view must
// still be the one built from the same jobs: what the cycle changed in
// its copy is not the Carry's.
func TestCarryViewAsBuilt(t *testing.T) {
	gen := func() *domain.Topology {
		topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 10, GPUsPerServer: 8, GPUModel: "H100-80GB"})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range topo.Servers() {
			v.CPUMilli, v.MemoryMiB = int64(64000+32000*(i%2)), int64(512<<10)
		}
		return topo
	}
	const cycles = 30
	servers := 0
	loads, wholes, views := 0, 0, 0
	seen := map[string]bool{}
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		topo := gen()
		servers = len(topo.Servers())
		s, refs := drainSnapshot(topo, 24, 8, func(i int) domain.Isolation {
			if i%5 == 0 {
				return domain.IsolationServer
			}
			return domain.IsolationGPU
		}, func(i int, w *domain.Workspace) {
			w.Guaranteed, w.BorrowLimit, w.LendLimit, w.Weight = 6, 96, 2, 1+i%3
		})
		s.Policy = sched.Policy{Grace: 20 * time.Second, ReclaimBackoff: time.Minute, HalfLife: 10 * time.Minute}
		now := domaintest.Now
		id := uint64(0)
		s.Jobs = mixedJobs(rng, s, refs, &id, 300, now)
		var carry sched.Carry
		busy := func() string { // a server some job holds
			for _, j := range s.Jobs {
				if len(j.Placement) > 0 {
					return j.Placement[0].Server
				}
			}
			return topo.Servers()[0].Name
		}
		for cycle := 0; cycle < cycles; cycle++ {
			flip := func(iso domain.Isolation) {
				tn := *s.Tenants["t001"]
				tn.Isolation = iso
				s.Tenants["t001"] = &tn
			}
			switch cycle {
			case 4:
				flip(domain.IsolationServer)
				seen["isolation"] = true
			case 9:
				flip(domain.IsolationGPU)
			case 6:
				name := busy()
				s.Nodes = map[string]domain.NodeCondition{name: {Server: name, Cordoned: true}}
				seen["cordon"] = true
			case 8:
				s.Nodes = nil
			case 14:
				topo = gen()
				s.Topology, s.Static = topo, sched.NewStatic(topo)
				seen["topology"] = true
			}
			view, _, _ := sched.CarryView(&carry, s)
			if whole := sched.WholeView(s); view != whole {
				t.Fatalf("seed %d cycle %d: the Carry's view differs from the one built from every job:\n%s", seed, cycle, firstDiff(view, whole))
			}
			if odd := sched.CarryOdd(&carry, s); odd != "" {
				t.Fatalf("seed %d cycle %d: %s", seed, cycle, odd)
			}
			plan := carry.Schedule(s, now)
			after, l, f := sched.CarryView(&carry, s)
			if after != view {
				t.Fatalf("seed %d cycle %d: the cycle changed the Carry's view:\n%s", seed, cycle, firstDiff(after, view))
			}
			if full := sched.Schedule(s, now); !reflect.DeepEqual(plan, full) {
				t.Fatalf("seed %d cycle %d: the plan through the Carry differs from the one summing every job", seed, cycle)
			}
			for _, j := range s.Jobs {
				for _, p := range j.Placement {
					switch {
					case p.Share > 0:
						seen["share"] = true
					case len(p.MIG) > 0:
						seen["mig"] = true
					}
				}
				if j.State == domain.JobPreempting {
					seen["preempting"] = true
				}
			}
			if len(plan.Releases) > 0 {
				seen["requeue"] = true
			}
			if len(plan.Placements) > 0 {
				seen["placement"] = true
			}
			if cycle == cycles-1 {
				loads, wholes, views = loads+l, wholes+f, views+3*cycles
			}
			commitByCopy(s, plan, now, rng)
			s.Jobs = append(s.Jobs, mixedJobs(rng, s, refs, &id, 5+rng.IntN(20), now)...)
			now = now.Add(time.Duration(10+rng.IntN(60)) * time.Second)
		}
	}
	for _, k := range []string{"placement", "preempting", "requeue", "share", "mig", "isolation", "cordon", "topology"} {
		if !seen[k] {
			t.Errorf("no %s in the run: not the change this test is for", k)
		}
	}
	// The view is loaded whole after a sum, a new topology and each
	// isolation change; the other cycles load only the servers changed.
	patched := loads - wholes*servers
	t.Logf("%d views made, %d of them by loading all %d servers; %d servers loaded in the others", views, wholes, servers, patched)
	if patched >= (views-wholes)*servers/4 {
		t.Fatalf("%d servers loaded in %d views: the view is not patched", patched, views-wholes)
	}
}

// firstDiff is the first line where a and b differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return "carry: " + al[i] + "\nwhole: " + bl[i]
		}
	}
	return "lengths differ"
}

// TestCarryViewTwoJobsOfOneID: a Carry whose jobs came with two of one ID
// (not by ID: summed whole) and are then patched, the one copy kept and
// the other gone, must still show the kept copy's GPUs taken. The view
// finds a job's entries by ID; one made from such a list is made again
// (it fails, the kept copy's GPUs shown free, when the view is patched).
func TestCarryViewTwoJobsOfOneID(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8, GPUModel: "H100-80GB"})
	if err != nil {
		t.Fatal(err)
	}
	s, refs := drainSnapshot(topo, 2, 2, func(int) domain.Isolation { return domain.IsolationGPU }, func(_ int, w *domain.Workspace) {
		w.Guaranteed, w.BorrowLimit = 32, 32
	})
	srv := topo.Servers()[0].Name
	at := domaintest.Now.Add(-time.Minute)
	running := func(id uint64, ref string, gpu int) *domain.Job {
		w := s.Workspaces[ref]
		return &domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: w.Tenant, Workspace: w.Name, GPUs: 1, CPUMilli: 1000, MemoryMiB: 1024},
			State: domain.JobRunning, SubmittedAt: at, PlacedAt: &at, Placement: []domain.Placement{{Server: srv, GPUs: []int{gpu}}}}
	}
	kept, gone := running(5, refs[0], 0), running(5, refs[1], 1)
	var others []*domain.Job
	for k := range 8 {
		others = append(others, running(uint64(6+k), refs[k%2], 2+k%6))
	}
	var cr sched.Carry
	s.Jobs = append([]*domain.Job{kept, gone}, others...)
	if view, _, _ := sched.CarryView(&cr, s); view != sched.WholeView(s) {
		t.Fatalf("the view of two jobs of one ID differs from one built whole:\n%s\nwant\n%s", view, sched.WholeView(s))
	}
	s.Jobs = append([]*domain.Job{kept}, others...)
	view, _, _ := sched.CarryView(&cr, s)
	if want := sched.WholeView(s); view != want {
		t.Fatalf("with one of two jobs of one ID gone, the view differs from one built whole:\n%s\nwant\n%s", view, want)
	}
}
