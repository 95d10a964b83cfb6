package sched_test

import (
	"cmp"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestCarryDecidesAlike drives a full cluster through cycles as the leader
// does (jobs placed, preempted, released, requeued, ended and submitted,
// each change a new copy of the job, as the state's Snapshotter hands them
// out) and decides every cycle twice: through a Carry that keeps its sums
// from the cycle before, and by Schedule, which sums every job. The plans
// must be equal, reasons included, and the Carry's sums (the shapes and
// hosts the JobFabric policy weighs, the units each workspace holds) must
// be those summed over every job. Jobs ask CPU, memory and GPU models, so
// every sum is exercised; a node is cordoned and the topology replaced
// midway (the Carry then starts over).
func TestCarryDecidesAlike(t *testing.T) {
	gen := func(model string) *domain.Topology {
		topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 12, GPUsPerServer: 8, GPUModel: model})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range topo.Servers() {
			v.CPUMilli, v.MemoryMiB = int64(64000+32000*(i%2)), int64(512<<10)
		}
		return topo
	}
	patched, placements, preemptions := 0, 0, 0
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 18))
		topo := gen("H100-80GB")
		s, refs := drainSnapshot(topo, 30, 12, func(i int) domain.Isolation {
			if i%4 == 0 {
				return domain.IsolationServer
			}
			return domain.IsolationGPU
		}, func(i int, w *domain.Workspace) {
			w.Guaranteed, w.BorrowLimit, w.LendLimit, w.Weight = 5, 96, 2, 1+i%3
		})
		s.Policy = sched.Policy{Grace: 20 * time.Second, ReclaimBackoff: time.Minute, HalfLife: 10 * time.Minute}
		now := domaintest.Now
		id := uint64(0)
		submit := func(n int) { s.Jobs = append(s.Jobs, mixedJobs(rng, s, refs, &id, n, now)...) }
		submit(400)
		var carry sched.Carry
		var held []*domain.Job
		var renamed *domain.Workspace
		for cycle := 0; cycle < 40; cycle++ {
			switch cycle {
			case 15:
				s.Nodes = map[string]domain.NodeCondition{topo.Servers()[3].Name: {Server: topo.Servers()[3].Name, Cordoned: true}}
			case 5:
				// Workspaces' guarantees change (new copies, as a
				// snapshot has them).
				for _, ref := range refs[:6] {
					w := *s.Workspaces[ref]
					w.Guaranteed, w.LendLimit = w.Guaranteed+3, 0
					s.Workspaces[ref] = &w
				}
			case 8:
				// Another workspace and tenant come.
				s.Tenants["late"] = &domain.Tenant{Name: "late", Isolation: domain.IsolationGPU}
				nw := &domain.Workspace{Tenant: "late", Name: "w", Guaranteed: 8, BorrowLimit: 64, Weight: 1}
				s.Workspaces[nw.Ref()] = nw
				refs = append(refs, nw.Ref())
			case 12:
				// A workspace goes, its jobs left behind (an unknown
				// workspace to the cycle); the same number comes back
				// under another name, so only the names tell.
				gone := s.Workspaces[refs[2]]
				delete(s.Workspaces, refs[2])
				nw := &domain.Workspace{Tenant: gone.Tenant, Name: "zz", Guaranteed: 4, BorrowLimit: 64, Weight: 2}
				s.Workspaces[nw.Ref()] = nw
				refs[2] = nw.Ref()
			case 18:
				// A tenant renamed, the same number of tenants.
				delete(s.Tenants, "late")
				s.Tenants["later"] = &domain.Tenant{Name: "later", Isolation: domain.IsolationServer}
			case 21:
				// A workspace renamed under its old key for a cycle: the
				// same refs as map keys, not as the workspaces name
				// themselves.
				renamed = s.Workspaces[refs[4]]
				w := *renamed
				w.Name += "x"
				s.Workspaces[refs[4]] = &w
			case 22:
				s.Workspaces[refs[4]] = renamed
			case 25:
				// A new topology, the same servers: every sum starts over.
				next := gen("H100-80GB")
				s.Topology, s.Static = next, sched.NewStatic(next)
			}
			if d := sched.CarryTable(&carry, s); d != "" {
				t.Fatalf("seed %d cycle %d: the Carry's table: %s", seed, cycle, d)
			}
			shapes, ok, hosts, used := sched.CarrySums(&carry, s)
			wShapes, wHosts, wUsed := sched.WholeSums(s)
			if !ok || !reflect.DeepEqual(shapes, wShapes) {
				t.Fatalf("seed %d cycle %d: the kept shapes differ from ShapesOf:\n%+v\n%+v", seed, cycle, shapes, wShapes)
			}
			if !reflect.DeepEqual(hosts, wHosts) {
				t.Fatalf("seed %d cycle %d: the kept hosts differ from those of every job", seed, cycle)
			}
			if !reflect.DeepEqual(used, wUsed) {
				t.Fatalf("seed %d cycle %d: the kept usage differs from the sum over every job:\n%v\n%v", seed, cycle, used, wUsed)
			}
			plan := carry.Schedule(s, now)
			if full := sched.Schedule(s, now); !reflect.DeepEqual(plan, full) {
				t.Fatalf("seed %d cycle %d: the plan through the Carry differs from the one summing every job:\n%+v\n%+v", seed, cycle, plan, full)
			}
			placements += len(plan.Placements)
			preemptions += len(plan.Preemptions)
			commitByCopy(s, plan, now, rng)
			holdBack(s, &held, rng)
			submit(5 + rng.IntN(25))
			now = now.Add(time.Duration(10+rng.IntN(60)) * time.Second)
		}
		// The memos the Carry keeps across cycles (mig.Place's starts,
		// indexSets) answer as what they memoize, and are kept.
		if n, wrong := sched.CarryMemos(&carry); wrong != "" || n == 0 {
			t.Fatalf("seed %d: the Carry's memos (%d kept): %s", seed, n, wrong)
		}
		p, _, kept := sched.CarryStats(&carry)
		patched += p
		// The queue's order came from the kept lists of pending jobs
		// (the plans above compare it), every cycle.
		if lists, misses := sched.CarryQueue(&carry); !lists || misses > 0 {
			t.Fatalf("seed %d: lists of pending jobs kept %v, %d cycles not ordered from them", seed, lists, misses)
		}
		if kept < 30 {
			t.Fatalf("seed %d: %d of 40 cycles kept the usage index", seed, kept)
		}
	}
	// Most cycles must have patched the sums (the case under test), not
	// summed every job again.
	if patched < 4*40*3/4 {
		t.Fatalf("%d of %d cycles patched the sums", patched, 4*40)
	}
	// And the plans must move work both ways (placements and preemptions
	// are what change the sums).
	t.Logf("%d cycles patched the sums; %d placements, %d preemptions", patched, placements, preemptions)
	if placements < 1000 || preemptions < 20 {
		t.Fatalf("%d placements and %d preemptions: not the churn this test is for", placements, preemptions)
	}
}

// commitByCopy applies plan to s as the state machine does, each changed
// job a new copy (the snapshot the plan was made from keeps its own):
// releases requeue, preemptions start the grace period, placements run,
// and some running jobs end. As a state may, it commits some plans only
// in part (a placement left out), some placements differently from the
// plan (a copy of its slice, GPUs in another order), and changes some
// placed jobs otherwise in the same commit (priority, memory, workspace):
// nothing the Carry keeps may count on a plan being committed as made.
func commitByCopy(s *sched.Snapshot, plan *sched.Plan, now time.Time, rng *rand.Rand) {
	placed, released, stopping := plan.ByJob()
	var live []*domain.Job
	for _, j := range s.Jobs {
		_, stops := stopping[j.ID]
		_, places := placed[j.ID]
		if places && rng.IntN(12) == 0 {
			places = false // left out of the commit
			delete(placed, j.ID)
		}
		r, reasoned := plan.Pending.Get(j.ID)
		reasoned = reasoned && !j.Reason.Equal(r)
		ends := j.State == domain.JobRunning && !places && rng.IntN(8) == 0
		if ends {
			continue
		}
		if !released[j.ID] && !stops && !places && !reasoned {
			if len(j.Placement) > 0 && rng.IntN(10) == 0 {
				// A new copy of a placed job: the same (as a start
				// or a status writes it), or holding other CPU, memory,
				// GPUs, a smaller share or another server, or in another
				// workspace of its tenant.
				cp := *j
				switch rng.IntN(6) {
				case 1:
					cp.CPUMilli += 500
				case 2:
					cp.MemoryMiB -= 512
				case 3:
					// One GPU fewer, or one moved to a GPU it does
					// not hold (as many units on other GPUs).
					cp.Placement = slices.Clone(cp.Placement)
					p := &cp.Placement[0]
					if p.Share > 0 {
						p.Share /= 2 // the same GPU, half as much of it
					}
					if len(p.GPUs) > 0 && len(p.MIG) == 0 && p.Share == 0 {
						p.GPUs = slices.Clone(p.GPUs)
						if g := slices.IndexFunc([]int{0, 1, 2, 3, 4, 5, 6, 7}, func(g int) bool { return !slices.Contains(p.GPUs, g) }); g >= 0 && rng.IntN(2) == 0 {
							p.GPUs[len(p.GPUs)-1] = g
						} else if len(p.GPUs) > 1 {
							p.GPUs = p.GPUs[:len(p.GPUs)-1]
						}
					}
				case 5:
					// Its first placement on another server.
					cp.Placement = slices.Clone(cp.Placement)
					servers := s.Topology.Servers()
					cp.Placement[0].Server = servers[rng.IntN(len(servers))].Name
				case 4:
					for _, w := range s.Workspaces {
						if w.Tenant == cp.Tenant && w.Name != cp.Workspace {
							cp.Workspace = w.Name
							break
						}
					}
				}
				j = &cp
			}
			live = append(live, j) // else unchanged: the same copy
			continue
		}
		cp := *j
		j = &cp
		if released[j.ID] {
			j.State, j.Placement, j.PlacedAt, j.StopDeadline, j.PreemptedFor = domain.JobPending, nil, nil, nil, 0
		}
		if p, ok := stopping[j.ID]; ok {
			d := p.Deadline
			j.State, j.StopDeadline, j.PreemptedFor, j.BorrowNotBefore = domain.JobPreempting, &d, p.ForJob, p.BorrowBackoff
		}
		if pl, ok := placed[j.ID]; ok {
			at := now
			if rng.IntN(6) == 0 {
				// Committed as another slice, GPUs in another order.
				cp := make([]domain.Placement, len(pl))
				for x, p := range pl {
					p.GPUs = slices.Clone(p.GPUs)
					slices.Reverse(p.GPUs)
					cp[x] = p
				}
				pl = cp
			}
			j.State, j.Placement, j.PlacedAt, j.Reason = domain.JobRunning, pl, &at, nil
			switch rng.IntN(16) {
			case 0:
				j.Priority++
			case 1:
				j.MemoryMiB += 1024
			case 2:
				// Moved to another workspace of its tenant (or one the
				// snapshot does not know).
				for _, w := range s.Workspaces {
					if w.Tenant == j.Tenant && w.Name != j.Workspace {
						j.Workspace = w.Name
						break
					}
				}
			}
		} else if reasoned {
			r := r
			j.Reason = &r
		}
		live = append(live, j)
	}
	s.Jobs = live
}

// holdBack takes a few pending jobs next to each other out of s for a
// cycle, every other cycle, and puts back those it held the cycle before,
// in ID order: jobs of lower IDs come back among the others, as from a
// source that missed them once (the rows after them then move right).
func holdBack(s *sched.Snapshot, held *[]*domain.Job, rng *rand.Rand) {
	back := *held
	*held = nil
	var live []*domain.Job
	from := len(s.Jobs)
	if rng.IntN(2) == 0 {
		from = rng.IntN(len(s.Jobs) + 1)
	}
	for k, j := range s.Jobs {
		if k >= from && len(*held) < 4 && j.State == domain.JobPending {
			*held = append(*held, j)
			continue
		}
		live = append(live, j)
	}
	live = append(live, back...)
	slices.SortFunc(live, func(a, b *domain.Job) int { return cmp.Compare(a.ID, b.ID) })
	s.Jobs = live
}

// mixedJobs are n new pending jobs of refs' workspaces, numbered after
// *id: whole GPUs, gangs of 8-GPU servers, MIG, shares, some with CPU,
// memory, GPU models and expected durations.
func mixedJobs(rng *rand.Rand, s *sched.Snapshot, refs []string, id *uint64, n int, now time.Time) []*domain.Job {
	var out []*domain.Job
	for k := 0; k < n; k++ {
		*id++
		w := s.Workspaces[refs[rng.IntN(len(refs))]]
		spec := domain.JobSpec{Tenant: w.Tenant, Workspace: w.Name, Preemptible: rng.IntN(2) == 0, Priority: rng.IntN(2),
			CPUMilli: int64(1000 * rng.IntN(16)), MemoryMiB: int64(1024 * rng.IntN(64))}
		switch r := rng.IntN(100); {
		case r < 8:
			spec.MIGProfile, spec.MIGCount = []string{"1g.10gb", "3g.40gb"}[rng.IntN(2)], 1+rng.IntN(2)
		case r < 18:
			spec.Share = []float64{0.25, 0.5}[rng.IntN(2)]
		case r < 75:
			spec.GPUs = []int{1, 2, 4, 8}[rng.IntN(4)]
		default:
			spec.GPUs, spec.GPUsPerNode = []int{16, 32}[rng.IntN(2)], 8
		}
		if rng.IntN(5) == 0 && spec.MIGProfile == "" {
			spec.GPUModels = []string{"H100-80GB", "H200-141GB"}
		}
		if rng.IntN(3) == 0 {
			spec.ExpectedDurationSeconds = int64(60 * (1 + rng.IntN(60)))
		}
		out = append(out, &domain.Job{ID: *id, JobSpec: spec, State: domain.JobPending, SubmittedAt: now})
	}
	return out
}
