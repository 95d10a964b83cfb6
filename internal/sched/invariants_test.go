package sched_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/mig"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// The property test lives outside package sched so that it can drive the
// real state machine (internal/state imports sched): every cycle's plan
// commits through the FSM's apply of a plan.apply entry, and every
// snapshot is the FSM's, as on the leader (server/schedule.go).

const unit = domain.UnitsPerGPU

// cluster drives the scheduler like the leader does: the snapshot from the
// state machine, the plan committed as one plan.apply entry, runtimes
// reporting through job.report, new jobs through job.submit, and a
// simulated clock.
type cluster struct {
	t       *testing.T
	rng     *rand.Rand
	f       *state.FSM
	index   uint64 // of the last log entry applied
	pol     sched.Policy
	now     time.Time
	model   map[string]string // server -> GPU model
	tenants map[string]domain.Tenant
	ws      map[string]domain.Workspace
	reclaim map[uint64][]time.Time // job -> times it was reclaimed
	waiting map[uint64]time.Time   // guaranteed job -> when it became placeable in principle
	snaps   sched.Snapshotter      // the leader loop's incremental snapshots
	carry   sched.Carry            // and its sums kept across cycles
}

const tick = 5 * time.Second

// apply commits one command as Raft applies a committed entry.
func (c *cluster) apply(t state.CommandType, payload any) *state.Result {
	c.t.Helper()
	b, err := state.Encode(t, c.now, "test", payload)
	if err != nil {
		c.t.Fatal(err)
	}
	c.index++
	return c.f.Apply(&raft.Log{Index: c.index, Type: raft.LogCommand, Data: b}).(*state.Result)
}

func (c *cluster) must(t state.CommandType, payload any) any {
	c.t.Helper()
	r := c.apply(t, payload)
	if r.Err != nil {
		c.t.Fatalf("%s: %v", t, r.Err)
	}
	return r.Value
}

func newCluster(t *testing.T, seed uint64) *cluster {
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	o := topology.GenerateOptions{Stripes: 1 + rng.IntN(2), ServersPerStripe: 2 + rng.IntN(4), GPUsPerServer: 8}
	if rng.IntN(3) == 0 {
		o.GPUsPerServer, o.NVLinkDomainSize, o.ServersPerStripe = 4, 8, 2*(1+rng.IntN(3))
	}
	topo, err := topology.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, rng: rng, f: state.New(), now: domaintest.Now, model: map[string]string{},
		tenants: map[string]domain.Tenant{}, ws: map[string]domain.Workspace{},
		pol:     sched.Policy{Grace: 10 * time.Second, ReclaimBackoff: time.Minute, HalfLife: 10 * time.Minute},
		reclaim: map[uint64][]time.Time{}, waiting: map[uint64]time.Time{}, snaps: sched.Snapshotter{Clone: state.CopyJob}}
	total := o.Stripes * o.ServersPerStripe * o.GPUsPerServer
	left := total
	for i := 0; i < 2+rng.IntN(3); i++ {
		name := fmt.Sprintf("t%d", i)
		iso := domain.IsolationGPU
		if rng.IntN(3) == 0 {
			iso = domain.IsolationServer
		}
		c.tenants[name] = domain.Tenant{Name: name, Isolation: iso, Network: domain.NetworkPureRT5}
		for k := 0; k < 1+rng.IntN(2); k++ {
			g := rng.IntN(left/3 + 1)
			left -= g
			w := domain.Workspace{Tenant: name, Name: fmt.Sprintf("w%d", k), Guaranteed: g, BorrowLimit: rng.IntN(total),
				LendLimit: rng.IntN(g + 1), Weight: 1 + rng.IntN(3), Priority: rng.IntN(2)}
			c.ws[w.Ref()] = w
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
		ref := slices.Sorted(maps.Keys(c.ws))[0]
		w := c.ws[ref]
		g := min(w.Guaranteed, total/4)
		w.Models = []domain.ModelQuota{{Model: "H100-80GB", Guaranteed: g, BorrowLimit: rng.IntN(total / 2), LendLimit: rng.IntN(g + 1)}}
		c.ws[ref] = w
	}
	for _, s := range topo.Servers() {
		c.model[s.Name] = s.GPUModel
	}
	c.must(state.CmdTopologyApply, state.TopologyApply{Topology: *topo})
	for _, name := range slices.Sorted(maps.Keys(c.tenants)) {
		c.must(state.CmdTenantCreate, state.TenantCreate{Tenant: c.tenants[name]})
	}
	for _, ref := range slices.Sorted(maps.Keys(c.ws)) {
		c.must(state.CmdWorkspaceCreate, state.WorkspaceCreate{Workspace: c.ws[ref]})
	}
	return c
}

// submit proposes a random job; the state machine refuses one that could
// never be admitted (more than its workspace or the cluster could give),
// as it does on a server.
func (c *cluster) submit() {
	refs := slices.Sorted(maps.Keys(c.ws))
	w := c.ws[refs[c.rng.IntN(len(refs))]]
	spec := domain.JobSpec{Tenant: w.Tenant, Workspace: w.Name, Preemptible: c.rng.IntN(2) == 0, Priority: c.rng.IntN(3)}
	switch c.rng.IntN(6) {
	case 0:
		spec.MIGProfile, spec.MIGCount = []string{"1g.10gb", "2g.20gb", "3g.40gb"}[c.rng.IntN(3)], 1+c.rng.IntN(3)
	case 1:
		spec.Share = []float64{0.25, 0.5, 0.125}[c.rng.IntN(3)]
	default:
		spec.GPUs = []int{1, 2, 4, 8, 16}[c.rng.IntN(5)]
		if spec.GPUs > 4 && c.rng.IntN(2) == 0 {
			spec.GPUsPerNode = 4
		}
	}
	if c.rng.IntN(4) == 0 {
		spec.MinRuntimeSeconds = 20
	}
	switch c.rng.IntN(6) {
	case 0:
		spec.GPUModels = []string{"A100-80GB", "H100-80GB"}
	case 1:
		spec.GPUModel = "H100-80GB"
	}
	if r := c.apply(state.CmdJobSubmit, state.JobSubmit{Spec: spec}); r.Err != nil && r.Err.Code != domain.CodeFailedPrecondition && r.Err.Code != domain.CodeInvalidArgument {
		c.t.Fatalf("submit %+v: %v", spec, r.Err)
	}
}

// cycle runs one scheduling cycle on the state machine's snapshot and
// commits its plan as the leader does: one plan.apply with the reasons of
// the pending jobs that changed. A plan made from the state it commits to
// must commit whole.
func (c *cluster) cycle(round int) (*sched.Plan, *state.PlanResult) {
	c.t.Helper()
	var snap *sched.Snapshot
	var full *sched.Snapshot
	c.f.Read(func(v state.View) {
		snap = c.snaps.Of(v, c.now.Add(-c.pol.HistoryHorizon()))
		full = sched.SnapshotOf(v, c.now.Add(-c.pol.HistoryHorizon()), state.CopyJob)
	})
	// The loop's snapshot shares the copies of unchanged jobs with the
	// previous cycle's: it must be the whole copy, job for job.
	if !reflect.DeepEqual(snap.Jobs, full.Jobs) || !reflect.DeepEqual(snap.History, full.History) {
		c.t.Fatalf("round %d: the incremental snapshot differs from a whole copy", round)
	}
	snap.Policy = c.pol
	plan := c.carry.Schedule(snap, c.now)
	// The cycle's scan cache and the sums kept across cycles stand in for
	// full scans and sums over every job: deciding without them must give
	// the same plan, reasons included.
	full.Policy = c.pol
	if ex := sched.ScheduleExhaustive(full, c.now); !reflect.DeepEqual(plan, ex) {
		c.t.Fatalf("round %d: the plan with the scan cache differs from the one without:\n%+v\n%+v", round, plan, ex)
	}
	cmd := state.PlanApply{Releases: plan.Releases, Preemptions: plan.Preemptions, Placements: plan.Placements, Reasons: map[uint64]domain.Reason{}}
	for _, j := range snap.Jobs {
		if r, ok := plan.Pending.Get(j.ID); ok && !j.Reason.Equal(r) {
			cmd.Reasons[j.ID] = r
		}
	}
	res := c.must(state.CmdPlanApply, cmd).(*state.PlanResult)
	if len(res.Rejected) > 0 {
		c.t.Fatalf("round %d: the plan applier refused %v of a plan made from the state it commits to", round, res.Rejected)
	}
	if n := len(plan.Releases) + len(plan.Preemptions) + len(plan.Placements); len(res.Released)+len(res.Preempted)+len(res.Placed) != n {
		c.t.Fatalf("round %d: the applier committed %+v of a plan of %d entries", round, res, n)
	}
	for _, pr := range plan.Preemptions {
		if pr.BorrowBackoff != nil {
			c.reclaim[pr.JobID] = append(c.reclaim[pr.JobID], c.now)
		}
	}
	// Runtimes start what was placed at once.
	for _, id := range res.Placed {
		c.must(state.CmdJobReport, state.JobReport{ID: id, State: state.ReportRunning})
	}
	return plan, res
}

// runtimes: running jobs finish at random; preempting ones sometimes stop
// before their deadline.
func (c *cluster) runtimes() {
	for _, j := range c.f.Jobs(state.JobFilter{}) {
		switch {
		case j.State == domain.JobRunning && c.rng.IntN(8) == 0:
			c.must(state.CmdJobReport, state.JobReport{ID: j.ID, State: state.ReportSucceeded})
		case j.State == domain.JobPreempting && c.rng.IntN(2) == 0:
			c.must(state.CmdJobReport, state.JobReport{ID: j.ID, State: state.ReportStopped})
		}
	}
}

func gpus(units int) string {
	if units%unit == 0 {
		return strconv.Itoa(units / unit)
	}
	return strconv.FormatFloat(float64(units)/unit, 'f', 3, 64)
}

// check asserts, on the state machine's jobs, the invariants that must
// hold after every committed plan.
func (c *cluster) check(round int) {
	t := c.t
	whole := map[[2]any]uint64{}
	layouts := map[[2]any][]mig.Instance{}
	shares := map[[2]any]int{}
	sharer := map[[2]any]string{}
	tenantsOn := map[string]map[string]bool{}
	used := map[string]int{}
	usedModel := map[[2]string]int{}
	jobs := c.f.Jobs(state.JobFilter{})
	for _, j := range jobs {
		if len(j.Placement) == 0 {
			continue
		}
		if j.State.Terminal() {
			t.Fatalf("round %d: job %d is %s but holds %+v", round, j.ID, j.State, j.Placement)
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
			pm := c.model[p.Server]
			if model != "" && pm != model && len(p.MIG) == 0 && p.Share == 0 {
				t.Fatalf("round %d: job %d spans GPU models %s and %s", round, j.ID, model, pm)
			}
			model = pm
			if ms := j.Models(); len(ms) > 0 && !slices.Contains(ms, pm) {
				t.Fatalf("round %d: job %d accepts %v but runs on %s", round, j.ID, ms, pm)
			}
		}
		want, err := sched.Demand(&j.JobSpec)
		if err != nil {
			t.Fatalf("round %d: job %d: %v", round, j.ID, err)
		}
		usedModel[[2]string{j.Tenant + "/" + j.Workspace, model}] += want
		if got != want {
			t.Fatalf("round %d: job %d holds %d units, asked for %d: gangs are whole or nothing", round, j.ID, got, want)
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
				if c.tenants[name].Isolation == domain.IsolationServer {
					t.Fatalf("round %d: server %s shared by %v though %s is server-isolated", round, srv, ts, name)
				}
			}
		}
	}
	for k, n := range usedModel {
		w := c.ws[k[0]]
		if q := w.Model(k[1]); q != nil && n > (q.Guaranteed+q.BorrowLimit)*unit {
			t.Fatalf("round %d: workspace %s uses %s %s GPUs, above its model quota %d + %d", round, k[0], gpus(n), k[1], q.Guaranteed, q.BorrowLimit)
		}
	}
	for ref, n := range used {
		w := c.ws[ref]
		if n > (w.Guaranteed+w.BorrowLimit)*unit {
			t.Fatalf("round %d: workspace %s uses %s GPUs, above guaranteed %d + borrowLimit %d", round, ref, gpus(n), w.Guaranteed, w.BorrowLimit)
		}
	}
	// No admit-reclaim thrash: a job is not reclaimed twice within the backoff.
	for id, ts := range c.reclaim {
		for i := 1; i < len(ts); i++ {
			if ts[i].Sub(ts[i-1]) < c.pol.ReclaimBackoff {
				t.Fatalf("round %d: job %d reclaimed at %v and again at %v, within the backoff", round, id, ts[i-1], ts[i])
			}
		}
	}
	// Bounded reclaim: a reclaim started for a job delivers it within the
	// grace period and one cycle (plus the cycle that started it).
	for _, j := range jobs {
		if j.State != domain.JobPending || j.Reason == nil || j.Reason.Code != sched.ReasonReclaim {
			delete(c.waiting, j.ID)
			continue
		}
		if _, ok := c.waiting[j.ID]; !ok {
			c.waiting[j.ID] = c.now
		}
		if waited := c.now.Sub(c.waiting[j.ID]); waited > c.pol.Grace+2*tick {
			t.Fatalf("round %d: job %d has waited %v on a reclaim (grace %v)", round, j.ID, waited, c.pol.Grace)
		}
	}
}

// TestInvariantsUnderRandomLoad runs random clusters, tenants and job
// streams through many cycles, each plan committed through the state
// machine, and checks the invariants on its state after each.
func TestInvariantsUnderRandomLoad(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 5
	}
	placed, reclaims, migs, shares, multi, stops := 0, 0, 0, 0, 0, 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			c := newCluster(t, seed)
			for round := 0; round < 60; round++ {
				for k := c.rng.IntN(4); k > 0; k-- {
					c.submit()
				}
				plan, res := c.cycle(round)
				placed += len(res.Placed)
				stops += len(res.Released)
				for _, p := range plan.Placements {
					j, _ := c.f.Job(p.JobID)
					if len(j.GPUModels) > 0 {
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
				c.check(round)
				c.runtimes()
				c.now = c.now.Add(tick)
			}
		})
	}
	// The streams must exercise what the invariants guard.
	if placed < 100 || reclaims == 0 || migs == 0 || shares == 0 || multi == 0 || stops == 0 {
		t.Fatalf("weak coverage: %d placements, %d reclaims, %d releases at a deadline, %d MIG, %d share and %d several-model placements",
			placed, reclaims, stops, migs, shares, multi)
	}
	t.Logf("%d placements, %d reclaims, %d releases at a deadline, %d MIG, %d share and %d several-model placements checked",
		placed, reclaims, stops, migs, shares, multi)
}
