package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// sim drives the scheduler like the leader does: it commits each plan
// (releases, preemptions, placements), lets runtimes finish or stop jobs,
// submits new ones, and advances a simulated clock.
type sim struct {
	t       *testing.T
	rng     *rand.Rand
	s       *Snapshot
	now     time.Time
	next    uint64
	reclaim map[uint64][]time.Time // job -> times it was reclaimed
	waiting map[uint64]time.Time   // guaranteed job -> when it became placeable in principle
}

const tick = 5 * time.Second

func newSim(t *testing.T, seed uint64) *sim {
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	o := topology.GenerateOptions{Stripes: 1 + rng.IntN(2), ServersPerStripe: 2 + rng.IntN(4), GPUsPerServer: 8}
	if rng.IntN(3) == 0 {
		o.GPUsPerServer, o.NVLinkDomainSize, o.ServersPerStripe = 4, 8, 2*(1+rng.IntN(3))
	}
	topo, err := topology.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	total := o.Stripes * o.ServersPerStripe * o.GPUsPerServer
	s := &Snapshot{Topology: topo, Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{},
		Policy: Policy{Grace: 10 * time.Second, ReclaimBackoff: time.Minute, HalfLife: 10 * time.Minute}}
	left := total
	for i := 0; i < 2+rng.IntN(3); i++ {
		name := fmt.Sprintf("t%d", i)
		iso := domain.IsolationGPU
		if rng.IntN(3) == 0 {
			iso = domain.IsolationServer
		}
		s.Tenants[name] = &domain.Tenant{Name: name, Isolation: iso}
		for k := 0; k < 1+rng.IntN(2); k++ {
			g := rng.IntN(left/3 + 1)
			left -= g
			s.Workspaces[fmt.Sprintf("%s/w%d", name, k)] = &domain.Workspace{Tenant: name, Name: fmt.Sprintf("w%d", k),
				Guaranteed: g, BorrowLimit: rng.IntN(total), LendLimit: rng.IntN(g + 1), Weight: 1 + rng.IntN(3), Priority: rng.IntN(2)}
		}
	}
	// A third of the clusters mix GPU models (every other server A100);
	// then one workspace carves an H100 quota out of its guarantee.
	if rng.IntN(3) == 0 {
		srv := topo.Sites[0].Fabrics[0].Servers
		for i := range srv {
			if i%2 == 1 {
				srv[i].GPUModel = "A100-80GB"
			}
		}
		w := sortedWorkspaces(s)[0]
		g := min(w.Guaranteed, total/4)
		w.Models = []domain.ModelQuota{{Model: "H100-80GB", Guaranteed: g, BorrowLimit: rng.IntN(total / 2), LendLimit: rng.IntN(g + 1)}}
	}
	return &sim{t: t, rng: rng, s: s, now: now, next: 1, reclaim: map[uint64][]time.Time{}, waiting: map[uint64]time.Time{}}
}

func (m *sim) submit() {
	ws := sortedWorkspaces(m.s)
	w := ws[m.rng.IntN(len(ws))]
	spec := domain.JobSpec{Tenant: w.Tenant, Workspace: w.Name, Preemptible: m.rng.IntN(2) == 0, Priority: m.rng.IntN(3)}
	switch m.rng.IntN(6) {
	case 0:
		spec.MIGProfile, spec.MIGCount = []string{"1g.10gb", "2g.20gb", "3g.40gb"}[m.rng.IntN(3)], 1+m.rng.IntN(3)
	case 1:
		spec.Share = []float64{0.25, 0.5, 0.125}[m.rng.IntN(3)]
	default:
		spec.GPUs = []int{1, 2, 4, 8, 16}[m.rng.IntN(5)]
		if spec.GPUs > 4 && m.rng.IntN(2) == 0 {
			spec.GPUsPerNode = 4
		}
	}
	if m.rng.IntN(4) == 0 {
		spec.MinRuntimeSeconds = 20
	}
	switch m.rng.IntN(6) {
	case 0:
		spec.GPUModels = []string{"A100-80GB", "H100-80GB"}
	case 1:
		spec.GPUModel = "H100-80GB"
	}
	m.s.Jobs = append(m.s.Jobs, &domain.Job{ID: m.next, JobSpec: spec, State: domain.JobPending, SubmittedAt: m.now})
	m.next++
}

func (m *sim) job(id uint64) *domain.Job {
	for _, j := range m.s.Jobs {
		if j.ID == id {
			return j
		}
	}
	return nil
}

// commit applies a plan the way the state machine does.
func (m *sim) commit(p *Plan) {
	for _, r := range p.Releases {
		j := m.job(r.JobID)
		m.release(j)
	}
	for _, pr := range p.Preemptions {
		j := m.job(pr.JobID)
		d := pr.Deadline
		j.State, j.StopDeadline, j.PreemptedFor = domain.JobPreempting, &d, pr.ForJob
		if pr.BorrowBackoff != nil {
			b := *pr.BorrowBackoff
			j.BorrowNotBefore = &b
			m.reclaim[j.ID] = append(m.reclaim[j.ID], m.now)
		}
	}
	// The state machine's plan applier re-checks every placement with Fit
	// against the state it commits to: on the state the plan was made
	// for, it must refuse none.
	fit := NewFit(m.s, m.now)
	for _, pl := range p.Placements {
		j := m.job(pl.JobID)
		if r, ok := fit.Place(j, pl.Placement); !ok {
			m.t.Fatalf("the plan applier refuses job %d's planned placement %+v on the state it was planned for: %s: %s", j.ID, pl.Placement, r.Code, r.Message)
		}
		t := m.now
		j.State, j.Placement, j.PlacedAt = domain.JobRunning, pl.Placement, &t
	}
	for id, r := range p.Pending {
		r := r
		m.job(id).Reason = &r
	}
}

func (m *sim) release(j *domain.Job) {
	if j.State == domain.JobPreempting && j.Preemptible {
		j.State, j.Placement, j.StopDeadline, j.PlacedAt = domain.JobPending, nil, nil, nil
		j.Requeues++
		return
	}
	t := m.now
	j.State, j.Placement, j.EndedAt = domain.JobSucceeded, nil, &t
}

// runtimes: running jobs finish at random; preempting ones sometimes stop
// before their deadline.
func (m *sim) runtimes() {
	var live []*domain.Job
	for _, j := range m.s.Jobs {
		switch {
		case j.State == domain.JobRunning && m.rng.IntN(8) == 0:
			m.release(j)
		case j.State == domain.JobPreempting && m.rng.IntN(2) == 0:
			m.release(j)
		}
		if !j.State.Terminal() {
			live = append(live, j)
		} else {
			m.s.History = append(m.s.History, j)
		}
	}
	m.s.Jobs = live
}

// check asserts the invariants that must hold after every cycle.
func (m *sim) check(round int) {
	t := m.t
	whole := map[[2]any]uint64{}
	layouts := map[[2]any][]mig.Instance{}
	shares := map[[2]any]int{}
	sharer := map[[2]any]string{}
	tenantsOn := map[string]map[string]bool{}
	used := map[string]int{}
	usedModel := map[[2]string]int{}
	for _, j := range m.s.Jobs {
		if len(j.Placement) == 0 {
			continue
		}
		got := 0
		for _, p := range j.Placement {
			if tenantsOn[p.Server] == nil {
				tenantsOn[p.Server] = map[string]bool{}
			}
			tenantsOn[p.Server][j.Tenant] = true
			for _, g := range p.GPUs {
				k := [2]any{p.Server, g}
				switch {
				case p.Share > 0:
					shares[k] += domain.ShareUnits(p.Share)
					if o := sharer[k]; o != "" && o != j.Tenant {
						t.Fatalf("round %d: GPU %v time-sliced by tenants %s and %s", round, k, o, j.Tenant)
					}
					sharer[k] = j.Tenant
					got += domain.ShareUnits(p.Share)
				case len(p.MIG) > 0:
					for _, sl := range p.MIG {
						if sl.GPU == g {
							layouts[k] = append(layouts[k], mig.Instance{Profile: sl.Profile, Start: sl.Start})
							pr, _ := mig.Lookup("H100-80GB", sl.Profile)
							got += pr.GPUUnits()
						}
					}
				default:
					if o, ok := whole[k]; ok {
						t.Fatalf("round %d: GPU %v given to jobs %d and %d", round, k, o, j.ID)
					}
					whole[k] = j.ID
					got += unit
				}
			}
		}
		// A job runs on one GPU model, one it accepts, and within its
		// workspace's quota on that model.
		model := ""
		for _, p := range j.Placement {
			pm := ""
			for _, srv := range m.s.Topology.Servers() {
				if srv.Name == p.Server {
					pm = srv.GPUModel
				}
			}
			if model != "" && pm != model && len(p.MIG) == 0 && p.Share == 0 {
				t.Fatalf("round %d: job %d spans GPU models %s and %s", round, j.ID, model, pm)
			}
			model = pm
			if ms := j.Models(); len(ms) > 0 && !slices.Contains(ms, pm) {
				t.Fatalf("round %d: job %d accepts %v but runs on %s", round, j.ID, ms, pm)
			}
		}
		usedModel[[2]string{j.Tenant + "/" + j.Workspace, model}] += demand(j)
		if got != demand(j) {
			t.Fatalf("round %d: job %d holds %d units, asked for %d: gangs are whole or nothing", round, j.ID, got, demand(j))
		}
		used[j.Tenant+"/"+j.Workspace] += got
	}
	for k, l := range layouts {
		if _, busy := whole[k]; busy || shares[k] > 0 {
			t.Fatalf("round %d: GPU %v mixes MIG with other use", round, k)
		}
		if err := mig.Validate(mig.Layout{Model: "H100-80GB", Instances: l}); err != nil {
			t.Fatalf("round %d: GPU %v has a MIG layout the GPU cannot create: %v", round, k, err)
		}
	}
	for k, n := range shares {
		if _, busy := whole[k]; busy || n > unit {
			t.Fatalf("round %d: GPU %v oversubscribed by shares (%d units) or shared with a whole-GPU job", round, k, n)
		}
	}
	for srv, ts := range tenantsOn {
		if len(ts) > 1 {
			for name := range ts {
				if m.s.Tenants[name].Isolation == domain.IsolationServer {
					t.Fatalf("round %d: server %s shared by %v though %s is server-isolated", round, srv, ts, name)
				}
			}
		}
	}
	for k, n := range usedModel {
		if q := m.s.Workspaces[k[0]].Model(k[1]); q != nil && n > (q.Guaranteed+q.BorrowLimit)*unit {
			t.Fatalf("round %d: workspace %s uses %s %s GPUs, above its model quota %d + %d", round, k[0], gpus(n), k[1], q.Guaranteed, q.BorrowLimit)
		}
	}
	for ref, n := range used {
		w := m.s.Workspaces[ref]
		if n > (w.Guaranteed+w.BorrowLimit)*unit {
			t.Fatalf("round %d: workspace %s uses %s GPUs, above guaranteed %d + borrowLimit %d", round, ref, gpus(n), w.Guaranteed, w.BorrowLimit)
		}
	}
	// No admit-reclaim thrash: a job is not reclaimed twice within the backoff.
	for id, ts := range m.reclaim {
		for i := 1; i < len(ts); i++ {
			if ts[i].Sub(ts[i-1]) < m.s.Policy.ReclaimBackoff {
				t.Fatalf("round %d: job %d reclaimed at %v and again at %v, within the backoff", round, id, ts[i-1], ts[i])
			}
		}
	}
	// Bounded reclaim: a reclaim started for a job delivers it within the
	// grace period and one cycle (plus the cycle that started it).
	for _, j := range m.s.Jobs {
		if j.State != domain.JobPending || j.Reason == nil || j.Reason.Code != ReasonReclaim {
			delete(m.waiting, j.ID)
			continue
		}
		if _, ok := m.waiting[j.ID]; !ok {
			m.waiting[j.ID] = m.now
		}
		if waited := m.now.Sub(m.waiting[j.ID]); waited > m.s.Policy.Grace+2*tick {
			t.Fatalf("round %d: job %d has waited %v on a reclaim (grace %v)", round, j.ID, waited, m.s.Policy.Grace)
		}
	}
}

// checkReservations asserts what holds for a plan's reservations: each is
// a whole gang of the job's size on existing GPUs, starts no earlier than
// now, names its basis, and no two overlap (each is computed with the
// earlier ones holding their GPUs). It returns how many there are.
func (m *sim) checkReservations(round int, p *Plan) int {
	t := m.t
	size := map[string]int{}
	for _, srv := range m.s.Topology.Servers() {
		size[srv.Name] = srv.GPUs
	}
	by := map[[2]any]uint64{}
	n := 0
	for id, r := range p.Pending {
		res := r.Reservation
		if res == nil {
			continue
		}
		n++
		j := m.job(id)
		if !res.Start.IsZero() && res.Start.Before(m.now) {
			t.Fatalf("round %d: job %d reserved from %v, before now %v", round, id, res.Start, m.now)
		}
		if len(res.Basis) == 0 {
			t.Fatalf("round %d: job %d's reservation names no basis", round, id)
		}
		got := 0
		for _, x := range res.Placement {
			for _, g := range x.GPUs {
				if g < 0 || g >= size[x.Server] {
					t.Fatalf("round %d: job %d reserved GPU %d of %q, which has %d", round, id, g, x.Server, size[x.Server])
				}
				k := [2]any{x.Server, g}
				if o, ok := by[k]; ok {
					t.Fatalf("round %d: GPU %v reserved for jobs %d and %d", round, k, o, id)
				}
				by[k] = id
				got++
			}
		}
		if got != j.GPUs {
			t.Fatalf("round %d: job %d of %d GPUs reserved %d", round, id, j.GPUs, got)
		}
	}
	return n
}

// TestInvariantsUnderRandomLoad runs random clusters, tenants and job
// streams through many cycles and checks the invariants after each.
func TestInvariantsUnderRandomLoad(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 5
	}
	placed, reclaims, migs, shares, multi, reserved := 0, 0, 0, 0, 0, 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			m := newSim(t, seed)
			for round := 0; round < 60; round++ {
				for k := m.rng.IntN(4); k > 0; k-- {
					m.submit()
				}
				plan := Schedule(m.s, m.now)
				for _, p := range plan.Placements {
					placed++
					if len(m.job(p.JobID).GPUModels) > 0 {
						multi++
					}
					for _, x := range p.Placement {
						if len(x.MIG) > 0 {
							migs++
						}
						if x.Share > 0 {
							shares++
						}
					}
				}
				for _, p := range plan.Preemptions {
					if p.BorrowBackoff != nil {
						reclaims++
					}
				}
				reserved += m.checkReservations(round, plan)
				m.commit(plan)
				m.check(round)
				m.runtimes()
				m.now = m.now.Add(tick)
			}
		})
	}
	// The streams must exercise what the invariants guard.
	if placed < 100 || reclaims == 0 || migs == 0 || shares == 0 || multi == 0 || reserved == 0 {
		t.Fatalf("weak coverage: %d placements, %d reclaims, %d MIG, %d share, %d several-model placements and %d reservations", placed, reclaims, migs, shares, multi, reserved)
	}
	t.Logf("%d placements, %d reclaims, %d MIG, %d share, %d several-model placements and %d reservations checked", placed, reclaims, migs, shares, multi, reserved)
}
