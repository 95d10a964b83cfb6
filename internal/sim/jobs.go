package sim

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/state"
)

// ITPJob is one row of an ITP job trace.
type ITPJob struct {
	ID       string
	Submit   int64 // seconds
	Duration int64 // seconds
	GPUs     int
}

// ReadITP reads an ITP trace (job_id, submission_time, duration, num_gpu).
func ReadITP(name string, r io.Reader) ([]ITPJob, error) {
	t, err := readTable(name, r, "job_id", "submission_time", "duration", "num_gpu")
	if err != nil {
		return nil, err
	}
	out := make([]ITPJob, 0, len(t.rows))
	for i := range t.rows {
		j := ITPJob{ID: t.str(i, "job_id")}
		if j.Submit, err = t.int64(i, "submission_time", 0, math.MaxInt32*64); err != nil {
			return nil, err
		}
		if j.Duration, err = t.int64(i, "duration", 0, domain.MaxSeconds*10); err != nil {
			return nil, err
		}
		g, err := t.int64(i, "num_gpu", 1, 4096)
		if err != nil {
			return nil, err
		}
		j.GPUs = int(g)
		out = append(out, j)
	}
	if len(out) == 0 {
		return nil, bad(name, "jobs", "%s lists no job", name)
	}
	return out, nil
}

// Tenant is one trace as a tenant of the shared pool.
type Tenant struct {
	Name string
	Jobs []ITPJob
}

// ParseCluster reads "128x8": servers x GPUs per server.
func ParseCluster(s string) (servers, gpus int, err error) {
	a, b, ok := strings.Cut(s, "x")
	servers, e1 := strconv.Atoi(a)
	gpus, e2 := strconv.Atoi(b)
	if !ok || e1 != nil || e2 != nil || servers < 1 || servers > 100000 || gpus < 1 || gpus > 16 {
		return 0, 0, bad("cluster", "cluster-shape", "cluster %q is not SERVERSxGPUS such as 128x8 (1..100000 servers of 1..16 GPUs)", s)
	}
	return servers, gpus, nil
}

// JobsPolicies are the policies of `sim jobs`.
var JobsPolicies = []string{"static", "borrow", "jobfabric"}

// JobsRun configures one replay of job traces on a shared pool.
type JobsRun struct {
	Tenants        []Tenant
	Servers, GPUs  int    // the pool: Servers x GPUs
	Policy         string // static, borrow, jobfabric
	Checkpoint     time.Duration
	Grace          time.Duration // jobfabric's preemption grace
	MaxArrivalTime time.Duration // arrivals after this are dropped (0: all)
	// FairShareReclaim and ChurnBudget are jobfabric's fair-share reclaim
	// (sched.Policy): off, and the GPUs it may reclaim per backoff window.
	FairShareReclaim bool
	ChurnBudget      int
}

// TenantResult is one tenant's outcome.
type TenantResult struct {
	Name       string  `json:"name"`
	Jobs       int     `json:"jobs"`
	P90Demand  int     `json:"p90Demand"`
	Guaranteed int     `json:"guaranteed"`
	Attainment float64 `json:"quotaAttainment"` // share of time with demand it got min(demand, guarantee)
	GPUHours   float64 `json:"gpuHours"`
	Borrowed   float64 `json:"borrowedGPUHours"`
	MeanJCTh   float64 `json:"meanJCTHours"`
}

// JobsResult is one replay's outcome.
type JobsResult struct {
	Policy      string  `json:"policy"`
	Servers     int     `json:"servers"`
	GPUs        int     `json:"gpus"`
	Jobs        int     `json:"jobs"`
	Completed   int     `json:"completed"`
	Utilization float64 `json:"utilization"` // time-averaged allocated / pool, %
	// UtilizationArrivals is the same until the last arrival: makespan
	// hangs on when the last long jobs start, this does not.
	UtilizationArrivals float64 `json:"utilizationArrivals"`
	MeanJCTh            float64 `json:"meanJCTHours"`
	P50JCTh             float64 `json:"p50JCTHours"`
	P99JCTh             float64 `json:"p99JCTHours"`
	MeanQueueh          float64 `json:"meanQueueHours"`
	P50Queueh           float64 `json:"p50QueueHours"`
	P99Queueh           float64 `json:"p99QueueHours"`
	Makespanh           float64 `json:"makespanHours"`
	Attainment          float64 `json:"quotaAttainment"` // mean over tenants, %
	Jain                float64 `json:"jainFairness"`
	BorrowedGPUh        float64 `json:"borrowedGPUHours"`
	Preemptions         int     `json:"preemptions"`
	LostGPUh            float64 `json:"lostGPUHours"`
	// Reclaim latency: from the moment a tenant under its guarantee has a
	// pending job that fits in what is left of its guarantee (the tenant's
	// pending jobs taken in queue order) until that job is placed. Reclaims
	// counts such waits that ended in a placement; ReclaimLost those that
	// ended because the tenant's other work took the room first.
	ReclaimP50s      float64 `json:"reclaimP50Seconds"`
	ReclaimP99s      float64 `json:"reclaimP99Seconds"`
	ReclaimMaxs      float64 `json:"reclaimMaxSeconds"`
	ReclaimBounds    float64 `json:"reclaimBoundSeconds"`
	Reclaims         int     `json:"reclaims"`
	ReclaimOverBound int     `json:"reclaimsOverBound"`
	// ReclaimFragmented counts the waits over the bound whose job no
	// reclaim within the rules could have placed when its wait began
	// (reclaimable): the borrowed GPUs were spread over servers that hold
	// guaranteed work too, and no room of its shape (whole servers for a
	// gang) could be freed.
	ReclaimFragmented int            `json:"reclaimsFragmented"`
	ReclaimLost       int            `json:"reclaimsLost"`
	OverBound         []OverWait     `json:"overBound,omitempty"`
	Cycles            int            `json:"cycles"`
	Seconds           float64        `json:"seconds"`
	Tenants           []TenantResult `json:"tenants"`
	UtilizationSer    []float64      `json:"utilizationSeries"` // allocated % per hour
}

// simJob is a job's life in the replay.
type simJob struct {
	j        *domain.Job
	tenant   int
	submit   int64
	left     float64 // seconds of work left
	start    int64   // when the current run (or last checkpoint) began
	firstRun int64   // -1 until placed once
	end      int64
	// entitledAt is when the job became guaranteed demand (pending, and
	// fitting in what is left of its tenant's guarantee), -1 if it is not.
	entitledAt int64
	// fragmented: when the clock started, no reclaim within the rules
	// could make room for it (reclaimable).
	fragmented bool
	gpus       int
	// trail is the scheduler's reasons for the job during its current
	// wait as guaranteed demand, one entry per change of reason code.
	trail []string
	// said is the scheduler's last reason for the job, seeding the trail
	// when a wait begins.
	said domain.Reason
}

// OverWait is one guaranteed wait over the bound, with what the scheduler
// said while it lasted: the evidence its cause is classified from.
type OverWait struct {
	Tenant  string  `json:"tenant"`
	Job     string  `json:"job"`
	GPUs    int     `json:"gpus"`
	From    int64   `json:"fromSeconds"`
	Seconds float64 `json:"seconds"`
	// Fragmented: no reclaim within the rules could have made room when
	// the wait began (reclaimable).
	Fragmented bool `json:"fragmented"`
	// Cause is the classification (classifyWait), Trail the reasons.
	Cause string   `json:"cause"`
	Trail []string `json:"trail"`
}

// p90Concurrency is the 90th percentile of a trace's concurrent GPU demand
// had it run alone with no queueing, sampled at every arrival and end.
func p90Concurrency(jobs []ITPJob) int {
	type ev struct {
		t int64
		d int
	}
	var evs []ev
	for _, j := range jobs {
		evs = append(evs, ev{j.Submit, j.GPUs}, ev{j.Submit + j.Duration, -j.GPUs})
	}
	sort.Slice(evs, func(a, b int) bool {
		if evs[a].t != evs[b].t {
			return evs[a].t < evs[b].t
		}
		return evs[a].d < evs[b].d
	})
	// Time-weighted: the level held over each interval.
	type lvl struct {
		v  int
		dt int64
	}
	var ls []lvl
	cur := 0
	var total int64
	for i, e := range evs {
		cur += e.d
		if i+1 < len(evs) {
			dt := evs[i+1].t - e.t
			if dt > 0 {
				ls = append(ls, lvl{cur, dt})
				total += dt
			}
		}
	}
	sort.Slice(ls, func(a, b int) bool { return ls[a].v < ls[b].v })
	var acc int64
	for _, l := range ls {
		acc += l.dt
		if float64(acc) >= 0.9*float64(total) {
			return l.v
		}
	}
	return cur
}

// Guarantees splits the pool among tenants in proportion to each trace's
// p90 concurrent GPU demand (floor; the remainder stays unguaranteed).
func Guarantees(tenants []Tenant, pool int) (p90, g []int) {
	p90 = make([]int, len(tenants))
	g = make([]int, len(tenants))
	sum := 0
	for i, t := range tenants {
		p90[i] = max(1, p90Concurrency(t.Jobs))
		sum += p90[i]
	}
	for i := range tenants {
		g[i] = pool * p90[i] / sum
	}
	return p90, g
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// poolTopology is Servers x GPUs servers, 32 servers per stripe.
func poolTopology(servers, gpus int) *domain.Topology {
	f := domain.Fabric{Name: "pool"}
	for i := 0; i < servers; i++ {
		f.Servers = append(f.Servers, domain.Server{Name: fmt.Sprintf("s%05d", i), Stripe: i / 32, GPUModel: "H100-80GB", GPUs: gpus})
	}
	return &domain.Topology{Sites: []domain.Site{{Name: "sim", Fabrics: []domain.Fabric{f}}}}
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int64) time.Time { return epoch.Add(time.Duration(s) * time.Second) }

// RunJobs replays the traces on the pool with a simulated clock.
func RunJobs(o JobsRun, progress func(string)) (*JobsResult, error) {
	if !containsStr(JobsPolicies, o.Policy) {
		return nil, bad("policy", "policy-name", "policy %q is not one of %s", o.Policy, strings.Join(JobsPolicies, ", "))
	}
	if len(o.Tenants) == 0 {
		return nil, bad("trace", "required", "sim jobs needs at least one --trace")
	}
	if o.Checkpoint <= 0 {
		o.Checkpoint = 30 * time.Minute
	}
	if o.Grace <= 0 {
		o.Grace = 30 * time.Second
	}
	pool := o.Servers * o.GPUs
	// jobfabric's bound on reclaim latency: the grace period and one cycle
	// of the leader (2 s); the waits of every policy are counted against it.
	bound := o.Grace.Seconds() + 2
	p90, guar := Guarantees(o.Tenants, pool)
	res := &JobsResult{Policy: o.Policy, Servers: o.Servers, GPUs: pool}
	topo := poolTopology(o.Servers, o.GPUs)
	static := sched.NewStatic(topo)
	tenants := map[string]*domain.Tenant{}
	workspaces := map[string]*domain.Workspace{}
	for i, t := range o.Tenants {
		tenants[t.Name] = &domain.Tenant{Name: t.Name, Isolation: domain.IsolationGPU}
		w := &domain.Workspace{Tenant: t.Name, Name: "default", Guaranteed: guar[i], Weight: 1}
		if o.Policy != "static" {
			w.BorrowLimit, w.LendLimit = pool, guar[i]
		}
		workspaces[w.Ref()] = w
	}
	// Jobs, by arrival; each trace shifted so it starts at 0.
	var all []*simJob
	for ti, t := range o.Tenants {
		first := int64(math.MaxInt64)
		for _, j := range t.Jobs {
			first = min(first, j.Submit)
		}
		for _, x := range t.Jobs {
			sub := x.Submit - first
			if o.MaxArrivalTime > 0 && sub > int64(o.MaxArrivalTime/time.Second) {
				continue
			}
			if x.GPUs > pool {
				continue
			}
			gpus := x.GPUs
			j := &domain.Job{State: domain.JobPending, SubmittedAt: at(sub)}
			j.Tenant, j.Workspace, j.Name, j.GPUs, j.Preemptible = t.Name, "default", x.ID, gpus, true
			if gpus > o.GPUs && gpus%o.GPUs != 0 {
				j.GPUsPerNode = 0
			}
			j.ExpectedDurationSeconds = min(x.Duration, domain.MaxSeconds)
			all = append(all, &simJob{j: j, tenant: ti, submit: sub, left: float64(max(x.Duration, 1)), firstRun: -1, entitledAt: -1, gpus: gpus})
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].submit < all[b].submit })
	for i, s := range all {
		s.j.ID = uint64(i + 1)
	}
	res.Jobs = len(all)
	byID := map[uint64]*simJob{}
	for _, s := range all {
		byID[s.j.ID] = s
	}
	nt := len(o.Tenants)
	alloc := make([]int, nt)  // GPUs held per tenant
	demand := make([]int, nt) // GPUs of pending + holding jobs
	attainT := make([]float64, nt)
	demandT := make([]float64, nt)
	gpuSec := make([]float64, nt)
	borrowSec := make([]float64, nt)
	var utilSec, utilArr float64
	active := map[uint64]*simJob{} // arrived, not ended
	// The baselines keep their own jobs (s.j) and placer; jobfabric's jobs
	// live in the state machine (ledger), s.j being its latest record.
	var placer *sched.Placer
	var led *ledger
	if o.Policy != "jobfabric" {
		placer = sched.NewPlacer(&sched.Snapshot{Topology: topo, Static: static, Tenants: tenants})
	} else {
		var err error
		if led, err = newLedger(topo, tenants, workspaces); err != nil {
			return nil, err
		}
	}
	var queue []*simJob // static/borrow FIFO of pending jobs
	var jct, qd, reclaim []float64
	var lastEnd int64
	hourly := map[int64]float64{}
	next := 0
	now := int64(0)
	prev := int64(0)
	var nextDue int64 = -1
	start := time.Now()
	holds := func(s *simJob) bool {
		st := s.j.State
		return st == domain.JobRunning || st == domain.JobPreempting
	}
	// stop ends a job's run: finished, or preempted (work since the last
	// checkpoint lost).
	stop := func(s *simJob, finished bool) {
		alloc[s.tenant] -= s.gpus
		ran := float64(now - s.start)
		if finished {
			demand[s.tenant] -= s.gpus
			jct = append(jct, float64(now-s.submit))
			lastEnd = max(lastEnd, now)
			delete(active, s.j.ID)
			res.Completed++
		} else {
			kept := math.Floor(ran/o.Checkpoint.Seconds()) * o.Checkpoint.Seconds()
			s.left -= kept
			res.LostGPUh += (ran - kept) * float64(s.gpus) / 3600
			res.Preemptions++
		}
		if placer == nil {
			return // the state machine changed the job
		}
		placer.Release(s.j)
		if finished {
			e := at(now)
			s.j.State, s.j.EndedAt = domain.JobSucceeded, &e
		} else {
			s.j.State = domain.JobPending
			s.j.Requeues++
		}
		s.j.Placement, s.j.PlacedAt, s.j.StartedAt, s.j.StopDeadline, s.j.PreemptedFor = nil, nil, nil, nil, 0
	}
	run := func(s *simJob, pl []domain.Placement) {
		if placer != nil {
			s.j.State, s.j.Placement = domain.JobRunning, pl
			t := at(now)
			s.j.PlacedAt, s.j.StartedAt = &t, &t
		}
		s.start = now
		s.end = now + int64(math.Ceil(s.left))
		if s.entitledAt >= 0 {
			wait := float64(now - s.entitledAt)
			reclaim = append(reclaim, wait)
			if wait > bound {
				res.ReclaimOverBound++
				if s.fragmented {
					res.ReclaimFragmented++
				}
				res.OverBound = append(res.OverBound, OverWait{Tenant: o.Tenants[s.tenant].Name, Job: s.j.Name, GPUs: s.gpus,
					From: s.entitledAt, Seconds: wait, Fragmented: s.fragmented, Cause: classifyWait(s.trail, s.fragmented), Trail: s.trail})
			}
			s.entitledAt = -1
			s.trail = nil
		}
		alloc[s.tenant] += s.gpus
		if s.firstRun < 0 {
			s.firstRun = now
			qd = append(qd, float64(now-s.submit))
		}
	}
	for {
		// Next event: an arrival, an end, a due deadline.
		t := int64(math.MaxInt64)
		if next < len(all) {
			t = all[next].submit
		}
		for _, s := range active {
			if holds(s) && s.end < t {
				t = s.end
			}
		}
		if nextDue >= 0 && nextDue < t {
			t = nextDue
		}
		if t == math.MaxInt64 {
			break
		}
		now = t
		// Integrate the metrics over [prev, now).
		if dt := float64(now - prev); dt > 0 {
			tot := 0
			for i := 0; i < nt; i++ {
				tot += alloc[i]
				gpuSec[i] += float64(alloc[i]) * dt
				borrowSec[i] += float64(max(0, alloc[i]-guar[i])) * dt
				if demand[i] > 0 {
					demandT[i] += dt
					if alloc[i] >= min(demand[i], guar[i]) {
						attainT[i] += dt
					}
				}
			}
			utilSec += float64(tot) * dt
			if lastArrival := all[len(all)-1].submit; prev < lastArrival {
				utilArr += float64(tot) * float64(min(now, lastArrival)-prev)
			}
			for h := prev / 3600; h <= (now-1)/3600; h++ {
				lo, hi := max(prev, h*3600), min(now, (h+1)*3600)
				hourly[h] += float64(tot) * float64(hi-lo)
			}
		}
		prev = now
		// Ends first, then arrivals.
		var ended []*simJob
		for _, s := range active {
			if holds(s) && s.end <= now {
				ended = append(ended, s)
			}
		}
		sort.Slice(ended, func(a, b int) bool { return ended[a].j.ID < ended[b].j.ID })
		for _, s := range ended {
			if led != nil {
				if err := led.report(now, s, state.ReportSucceeded); err != nil {
					return nil, err
				}
			}
			stop(s, true)
		}
		for next < len(all) && all[next].submit <= now {
			s := all[next]
			if led != nil {
				if err := led.submit(now, s); err != nil {
					return nil, err
				}
			}
			active[s.j.ID] = s
			demand[s.tenant] += s.gpus
			queue = append(queue, s)
			next++
		}
		res.Cycles++
		if led != nil {
			var err error
			if nextDue, err = cycleJobfabric(&o, now, led, byID, stop, run); err != nil {
				return nil, err
			}
		} else {
			queue = cycleQuota(o.Policy == "borrow", now, queue, active, placer, guar, alloc, pool, stop, run)
			nextDue = -1
		}
		res.ReclaimLost += entitle(now, active, guar, alloc, func(s *simJob) bool {
			return !reclaimable(s, active, guar, o.Servers, o.GPUs)
		})
		if progress != nil && res.Cycles%5000 == 0 {
			progress(fmt.Sprintf("%s: %d/%d jobs arrived, %d done, %.0f h simulated", o.Policy, next, len(all), res.Completed, float64(now)/3600))
		}
	}
	res.Seconds = time.Since(start).Seconds()
	span := float64(max(lastEnd, 1))
	res.Makespanh = span / 3600
	res.Utilization = 100 * utilSec / (span * float64(pool))
	if last := all[len(all)-1].submit; last > 0 {
		res.UtilizationArrivals = 100 * utilArr / (float64(last) * float64(pool))
	}
	res.MeanJCTh, res.P50JCTh, res.P99JCTh = mean(jct)/3600, percentile(jct, .5)/3600, percentile(jct, .99)/3600
	res.MeanQueueh, res.P50Queueh, res.P99Queueh = mean(qd)/3600, percentile(qd, .5)/3600, percentile(qd, .99)/3600
	res.Reclaims = len(reclaim)
	res.ReclaimP50s, res.ReclaimP99s, res.ReclaimMaxs = percentile(reclaim, .5), percentile(reclaim, .99), percentile(reclaim, 1)
	res.ReclaimBounds = bound
	var sumA, sumA2 float64
	for i, t := range o.Tenants {
		tr := TenantResult{Name: t.Name, Jobs: len(t.Jobs), P90Demand: p90[i], Guaranteed: guar[i], GPUHours: gpuSec[i] / 3600, Borrowed: borrowSec[i] / 3600}
		if demandT[i] > 0 {
			tr.Attainment = 100 * attainT[i] / demandT[i]
		} else {
			tr.Attainment = 100
		}
		var js []float64
		for _, s := range all {
			if s.tenant == i && s.j.State == domain.JobSucceeded && s.j.EndedAt != nil {
				js = append(js, s.j.EndedAt.Sub(s.j.SubmittedAt).Seconds())
			}
		}
		tr.MeanJCTh = mean(js) / 3600
		res.BorrowedGPUh += tr.Borrowed
		sumA += tr.Attainment
		sumA2 += tr.Attainment * tr.Attainment
		res.Tenants = append(res.Tenants, tr)
	}
	res.Attainment = sumA / float64(nt)
	if sumA2 > 0 {
		res.Jain = sumA * sumA / (float64(nt) * sumA2)
	}
	hours := int64(span / 3600)
	for h := int64(0); h <= hours; h++ {
		res.UtilizationSer = append(res.UtilizationSer, 100*hourly[h]/3600/float64(pool))
	}
	return res, nil
}

// entitle starts and stops the reclaim-latency clocks after a cycle. A
// tenant's guaranteed demand is its pending jobs, in queue order (arrival),
// each fitting in what is left of the guarantee above what the tenant holds
// (its jobs being preempted excluded, as the scheduler counts them) and the
// earlier ones: a job that fits starts its clock, a job that does not is
// skipped (a later, smaller one may fit). A clock stops at placement (run)
// or, uncounted, when the job no longer fits because the tenant's other
// work took the room first; entitle returns how many stopped so.
func entitle(now int64, active map[uint64]*simJob, guar, alloc []int, fragmented func(*simJob) bool) int {
	left := make([]int, len(guar))
	for i := range guar {
		left[i] = guar[i] - alloc[i]
	}
	for _, s := range active {
		if s.j.State == domain.JobPreempting {
			left[s.tenant] += s.gpus
		}
	}
	var pending []*simJob
	for _, s := range active {
		if s.j.State == domain.JobPending && (s.entitledAt >= 0 || left[s.tenant] > 0) {
			pending = append(pending, s)
		}
	}
	sort.Slice(pending, func(a, b int) bool { return pending[a].j.ID < pending[b].j.ID })
	lost := 0
	for _, s := range pending {
		if s.gpus <= left[s.tenant] {
			left[s.tenant] -= s.gpus
			if s.entitledAt < 0 {
				s.entitledAt = now
				s.fragmented = fragmented(s)
				if s.said.Code != "" {
					s.trail = []string{fmt.Sprintf("%s +0s: %s", s.said.Code, s.said.Message)}
				}
			}
		} else if s.entitledAt >= 0 {
			s.entitledAt = -1
			s.trail = nil
			lost++
		}
	}
	return lost
}

// reclaimable reports whether a reclaim within the rules could make room
// for s now: victims only from tenants above their guarantee, from each at
// most what it borrowed. Optimistic: jobs being preempted count as gone,
// though their GPUs may be promised to other waiting jobs. Per server:
// its free GPUs plus what it could free; a job larger than a server needs
// as many servers as its gang (the largest divisor of its GPUs that a
// server holds, per server), the cheapest in borrowed GPUs first.
func reclaimable(s *simJob, active map[uint64]*simJob, guar []int, nServers, gpusPer int) bool {
	held := make([]int, len(guar))
	occ := map[string]map[int]int{} // server -> tenant -> GPUs
	for _, a := range active {
		if a.j.State != domain.JobRunning {
			continue
		}
		held[a.tenant] += a.gpus
		for _, p := range a.j.Placement {
			if occ[p.Server] == nil {
				occ[p.Server] = map[int]int{}
			}
			occ[p.Server][a.tenant] += len(p.GPUs)
		}
	}
	borrowed := make([]int, len(guar))
	for t := range guar {
		borrowed[t] = max(0, held[t]-guar[t])
	}
	per := s.gpus
	if per > gpusPer {
		per = 1
		for d := gpusPer; d >= 1; d-- {
			if s.gpus%d == 0 {
				per = d
				break
			}
		}
	}
	servers := s.gpus / per
	type cand struct {
		need map[int]int // borrowed GPUs to free, by tenant
		n    int
	}
	// Idle servers (not in occ) are room for one part of the gang each.
	cs := make([]cand, nServers-len(occ), nServers)
	for _, m := range occ {
		used := 0
		for _, n := range m {
			used += n
		}
		short := per - (gpusPer - used)
		if short <= 0 {
			cs = append(cs, cand{n: 0})
			continue
		}
		need := map[int]int{}
		for t, n := range m {
			if borrowed[t] > 0 && short > 0 {
				k := min(n, borrowed[t], short)
				need[t] = k
				short -= k
			}
		}
		if short <= 0 {
			sum := 0
			for _, k := range need {
				sum += k
			}
			cs = append(cs, cand{need: need, n: sum})
		}
	}
	sort.Slice(cs, func(a, b int) bool { return cs[a].n < cs[b].n })
	got := 0
	for _, c := range cs {
		ok := true
		for t, k := range c.need {
			if borrowed[t] < k {
				ok = false
			}
		}
		if !ok {
			continue
		}
		for t, k := range c.need {
			borrowed[t] -= k
		}
		if got++; got >= servers {
			return true
		}
	}
	return false
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// cycleJobfabric runs one scheduler cycle through the state machine
// (ledger.cycle) and accounts for what its plan committed: releases, then
// preemptions (the job runs on until its deadline), then placements, whose
// runtimes report them running at once. It returns when the next cycle is
// due without an event (a deadline; now again when releases freed GPUs
// this cycle), -1 if none.
func cycleJobfabric(o *JobsRun, now int64, led *ledger, byID map[uint64]*simJob,
	stop func(*simJob, bool), run func(*simJob, []domain.Placement)) (int64, error) {
	plan, res, err := led.cycle(now, sched.Policy{Grace: o.Grace, FairShareReclaim: o.FairShareReclaim, ChurnBudget: o.ChurnBudget})
	if err != nil {
		return 0, err
	}
	for _, id := range res.Released {
		s := byID[id]
		led.refresh(s)
		stop(s, false)
	}
	for _, id := range res.Preempted {
		led.refresh(byID[id])
	}
	for _, id := range res.Placed {
		s := byID[id]
		if err := led.report(now, s, state.ReportRunning); err != nil {
			return 0, err
		}
		run(s, s.j.Placement)
	}
	for id, r := range plan.Pending.All() {
		s := byID[id]
		if s != nil {
			s.said = r
		}
		if s != nil && s.entitledAt >= 0 {
			if n := len(s.trail); n == 0 || !strings.HasSuffix(s.trail[n-1], ": "+r.Message) {
				s.trail = append(s.trail, fmt.Sprintf("%s +%ds: %s", r.Code, now-s.entitledAt, r.Message))
			}
		}
	}
	// Releases free GPUs and preemptions change who is within its
	// guarantee (a victim's workspace may drop below it): the leader's
	// next cycle comes at once (after releases) or on its 2 s tick; the
	// replay runs it at once.
	if len(res.Released) > 0 || len(res.Preempted) > 0 {
		return now, nil
	}
	// The leader runs a cycle when the earliest deadline falls due: the
	// plan's Next, which counts the deadlines of its own preemptions.
	if plan.Next.IsZero() {
		return -1, nil
	}
	return int64(math.Ceil(plan.Next.Sub(epoch).Seconds())), nil
}

// cycleQuota is the static and the Kueue-like admission over the queue in
// arrival order (blocked jobs do not hold back later ones). A job within
// its tenant's guarantee is admitted when it fits; with borrowing, a job
// above its guarantee is admitted on idle capacity, and a job within its
// guarantee that does not fit reclaims: running jobs of tenants above their
// guarantee are evicted at once (no grace, no backoff), most recently
// admitted first, never taking a tenant below its guarantee, until it fits.
func cycleQuota(borrow bool, now int64, queue []*simJob, active map[uint64]*simJob, placer *sched.Placer, guar, alloc []int, pool int,
	stop func(*simJob, bool), run func(*simJob, []domain.Placement)) []*simJob {
	var keep, requeued []*simJob
	for _, s := range queue {
		if s.j.State != domain.JobPending {
			continue
		}
		within := alloc[s.tenant]+s.gpus <= guar[s.tenant]
		if !within && !borrow {
			keep = append(keep, s)
			continue
		}
		pl, _ := placer.Find(s.j)
		if pl == nil && within && borrow {
			var cands []*simJob
			for _, v := range active {
				if v.j.State == domain.JobRunning && v.tenant != s.tenant && alloc[v.tenant] > guar[v.tenant] {
					cands = append(cands, v)
				}
			}
			sort.Slice(cands, func(a, b int) bool {
				if cands[a].start != cands[b].start {
					return cands[a].start > cands[b].start
				}
				return cands[a].j.ID > cands[b].j.ID
			})
			over := map[int]int{}
			var victims []*simJob
			for _, v := range cands {
				if alloc[v.tenant]-over[v.tenant]-v.gpus < guar[v.tenant] {
					continue
				}
				over[v.tenant] += v.gpus
				placer.Release(v.j)
				victims = append(victims, v)
				if pl, _ = placer.Find(s.j); pl != nil {
					break
				}
			}
			for _, v := range victims {
				placer.Commit(v.j, v.j.Placement)
			}
			if pl != nil {
				for _, v := range victims {
					stop(v, false)
					requeued = append(requeued, v)
				}
			}
		}
		if pl == nil {
			keep = append(keep, s)
			continue
		}
		placer.Commit(s.j, pl)
		run(s, pl)
	}
	if len(requeued) > 0 {
		keep = append(keep, requeued...)
		sort.SliceStable(keep, func(a, b int) bool { return keep[a].submit < keep[b].submit })
	}
	return keep
}

// JobsSummary is what `sim jobs` writes to jobs.json.
type JobsSummary struct {
	Kind       string        `json:"kind"` // "jobs"
	Cluster    string        `json:"cluster"`
	Traces     []string      `json:"traces"`
	Checkpoint string        `json:"checkpoint"`
	Runs       []*JobsResult `json:"runs"`
}

// JobsTable writes the replay's headline figures, one policy per column.
func JobsTable(w io.Writer, runs []*JobsResult) {
	fmt.Fprint(w, "METRIC")
	for _, r := range runs {
		fmt.Fprintf(w, "\t%s", strings.ToUpper(r.Policy))
	}
	fmt.Fprintln(w)
	line := func(name string, f func(r *JobsResult) string) {
		fmt.Fprint(w, name)
		for _, r := range runs {
			fmt.Fprintf(w, "\t%s", f(r))
		}
		fmt.Fprintln(w)
	}
	for _, m := range jobsMetrics {
		line(m.name, m.f)
	}
}

var jobsMetrics = []struct {
	name string
	f    func(r *JobsResult) string
}{
	{"GPU utilization % (until the last arrival)", func(r *JobsResult) string {
		return fmt.Sprintf("%.1f (%.1f)", r.Utilization, r.UtilizationArrivals)
	}},
	{"JCT mean / p50 / p99 (h)", func(r *JobsResult) string {
		return fmt.Sprintf("%.2f / %.2f / %.1f", r.MeanJCTh, r.P50JCTh, r.P99JCTh)
	}},
	{"queueing mean / p50 / p99 (h)", func(r *JobsResult) string {
		return fmt.Sprintf("%.2f / %.2f / %.1f", r.MeanQueueh, r.P50Queueh, r.P99Queueh)
	}},
	{"makespan (h)", func(r *JobsResult) string { return fmt.Sprintf("%.0f", r.Makespanh) }},
	{"quota attainment % (mean of tenants)", func(r *JobsResult) string { return fmt.Sprintf("%.1f", r.Attainment) }},
	{"Jain fairness of attainment", func(r *JobsResult) string { return fmt.Sprintf("%.3f", r.Jain) }},
	{"borrowed GPU-hours", func(r *JobsResult) string { return fmt.Sprintf("%.0f", r.BorrowedGPUh) }},
	{"preemptions", func(r *JobsResult) string { return fmt.Sprintf("%d", r.Preemptions) }},
	{"GPU-hours lost", func(r *JobsResult) string { return fmt.Sprintf("%.0f", r.LostGPUh) }},
	{"guaranteed waits; reclaim latency p50 / p99 / max (s)", func(r *JobsResult) string {
		if r.Reclaims == 0 {
			return "0"
		}
		return fmt.Sprintf("%d; %.0f / %.0f / %.0f", r.Reclaims, r.ReclaimP50s, r.ReclaimP99s, r.ReclaimMaxs)
	}},
	{"waits over jobfabric's bound (grace + one cycle); of them, no reclaim within the rules could place at first", func(r *JobsResult) string {
		return fmt.Sprintf("%d over %.0f s; %d", r.ReclaimOverBound, r.ReclaimBounds, r.ReclaimFragmented)
	}},
	{"jobs completed / submitted", func(r *JobsResult) string { return fmt.Sprintf("%d / %d", r.Completed, r.Jobs) }},
	{"simulation seconds", func(r *JobsResult) string { return fmt.Sprintf("%.1f", r.Seconds) }},
}

// unservable is how the scheduler's reason names the rule that stops a
// reclaim (sched: "reclaim cannot serve it: RULE").
const unservable = "reclaim cannot serve it: "

// classifyWait names the cause of a wait over the bound from the reasons
// the scheduler gave during it: the rule that stopped its reclaim when the
// scheduler named one ("unservable: RULE"), else the distinct reason
// codes, in order (a servable wait the scheduler served late).
func classifyWait(trail []string, fragmented bool) string {
	for _, t := range trail {
		if _, rule, ok := strings.Cut(t, unservable); ok {
			rule, _, _ = strings.Cut(rule, ";")
			return "unservable: " + rule
		}
	}
	if fragmented {
		return "unservable: no reclaim within the rules frees room of its shape (the replay's check)"
	}
	var codes []string
	for _, t := range trail {
		c, _, _ := strings.Cut(t, " ")
		if len(codes) == 0 || codes[len(codes)-1] != c {
			codes = append(codes, c)
		}
	}
	if len(codes) == 0 {
		return "no_reason"
	}
	return strings.Join(codes, ">")
}
