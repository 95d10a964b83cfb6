package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// The bound: guaranteed demand is placed within the grace period and one
// cycle. These reproduce what broke it in the ITP trace replay (docs/
// benchmarks.md, issue #7), driving Schedule the way the leader does:
// commit releases, preemptions, placements; run a cycle at plan.Next.

func stepper(t *testing.T, w *domaintest.World) *sim {
	return &sim{t: t, s: snapshotOf(w), now: now, next: w.Next, reclaim: map[uint64][]time.Time{}, waiting: map[uint64]time.Time{}}
}

func placedIn(p *Plan, id uint64) bool {
	for _, pl := range p.Placements {
		if pl.JobID == id {
			return true
		}
	}
	return false
}

// TestReclaimServedAtDeadline: a guaranteed job of 8 GPUs needs a server
// where 4 GPUs are free and 4 are borrowed. Three things broke the bound:
// a borrower placed later in the same cycle took the free GPUs the reclaim
// counted on (so at the deadline the job needed another reclaim and another
// grace period); plan.Next did not name the deadline of the preemptions the
// plan itself issued (a leader without its 2 s tick, or a simulator, slept
// past it); and GPUs released at the deadline served nobody until the cycle
// after.
func TestReclaimServedAtDeadline(t *testing.T) {
	w := domaintest.NewWorld(t, domaintest.DGX(1, 1)).Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(8).Lend(8)).Workspace(domaintest.MakeWorkspace("b", "w").Borrow(8))
	for g := 0; g < 4; g++ {
		w.Running(domaintest.MakeJob("b/w", 0), domaintest.On("s1-gpu001", g))
	}
	w.PlacedAgo(1, time.Hour).PlacedAgo(2, time.Hour).PlacedAgo(3, time.Hour).PlacedAgo(4, time.Hour)
	w.Pending(domaintest.MakeJob("a/w", 8)) // 5: guaranteed
	w.Pending(domaintest.MakeJob("b/w", 1)) // 6: borrows
	m := stepper(t, w)
	p := Schedule(m.s, m.now)
	if got := victims(p); !equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("victims %v, want the 4 borrowed jobs", got)
	}
	if placedIn(p, 6) {
		t.Fatalf("the borrower was placed on GPUs the reclaim for job 5 counts on: %+v", p.Placements)
	}
	deadline := m.now.Add(DefaultPolicy.Grace)
	if !p.Next.Equal(deadline) {
		t.Fatalf("plan.Next %v, want the preemptions' deadline %v", p.Next, deadline)
	}
	m.commit(p)
	// The next cycle the leader runs is at plan.Next: the deadline. The
	// victims are released and the job placed in that cycle.
	m.now = p.Next
	p = Schedule(m.s, m.now)
	if len(p.Releases) != 4 || len(p.Preemptions) != 0 || !placedIn(p, 5) {
		t.Fatalf("at the deadline: releases %+v, preemptions %+v, placements %+v; want the 4 victims released and job 5 placed, nobody else preempted",
			p.Releases, p.Preemptions, p.Placements)
	}
}

// TestReclaimWithinGuaranteeInQueueOrder: a workspace with 24 guaranteed
// GPUs, nothing running, queues 16, 16 and 8 GPUs. Each job alone fits in
// the guarantee, but the second does not once the first is served: it
// borrows, and must not hold back the third, which the guarantee still
// covers (it waited behind it for hours in the trace replay).
func TestReclaimWithinGuaranteeInQueueOrder(t *testing.T) {
	w := domaintest.NewWorld(t, domaintest.DGX(1, 3)).Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(24).Lend(24)).Workspace(domaintest.MakeWorkspace("b", "w").Borrow(24))
	for i := 0; i < 24; i++ {
		w.Running(domaintest.MakeJob("b/w", 0), domaintest.On(fmt.Sprintf("s1-gpu%03d", 1+i/8), i%8))
		w.PlacedAgo(uint64(i+1), time.Hour)
	}
	w.Pending(domaintest.MakeJob("a/w", 16).PerNode(8)).Pending(domaintest.MakeJob("a/w", 16).PerNode(8)).Pending(domaintest.MakeJob("a/w", 8)) // 25, 26, 27
	p := Schedule(snapshotOf(w), now)
	for id, want := range map[uint64]string{25: ReasonReclaim, 27: ReasonReclaim} {
		if r := p.Pending.Of(id); r.Code != want {
			t.Errorf("job %d: reason %+v, want %s", id, r, want)
		}
	}
	if r := p.Pending.Of(26); r.Code == ReasonReclaim {
		t.Errorf("job 26 reclaims (%+v): it is beyond the guarantee once job 25 is served", r)
	}
	if n := len(p.Preemptions); n != 24 {
		t.Errorf("%d victims, want 24 (16 + 8 GPUs)", n)
	}
}

// TestReclaimWholeServerWithinWhatWasBorrowed: the borrower holds 24 single
// GPUs on 3 servers but borrowed only 8 of them (its guarantee is 16); its
// cheapest jobs are spread over the servers. Reclaim may take 8 GPUs of it,
// and a job of 8 GPUs needs a whole server: the cheapest 8 never free one,
// the 8 of one server do. The cost-ordered search alone found nothing and
// the guaranteed job waited for jobs to end.
func TestReclaimWholeServerWithinWhatWasBorrowed(t *testing.T) {
	w := domaintest.NewWorld(t, domaintest.DGX(1, 3)).Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(8).Lend(8)).Workspace(domaintest.MakeWorkspace("b", "w").Guaranteed(16).Borrow(8))
	for i := 0; i < 24; i++ {
		// Job i+1 on server 1+i%3: consecutive (similarly cheap) jobs
		// alternate servers; newer jobs (larger i) are cheaper.
		w.Running(domaintest.MakeJob("b/w", 0), domaintest.On(fmt.Sprintf("s1-gpu%03d", 1+i%3), i/3))
		w.PlacedAgo(uint64(i+1), time.Duration(25-i)*time.Minute)
	}
	w.Pending(domaintest.MakeJob("a/w", 8)) // 25
	p := Schedule(snapshotOf(w), now)
	if r := p.Pending.Of(25); r.Code != ReasonReclaim {
		t.Fatalf("job 25: reason %+v, want %s", r, ReasonReclaim)
	}
	servers := map[string]bool{}
	for _, pr := range p.Preemptions {
		servers[w.Job(pr.JobID).Placement[0].Server] = true
	}
	if len(p.Preemptions) != 8 || len(servers) != 1 {
		t.Fatalf("%d victims on servers %v, want the 8 jobs of one server", len(p.Preemptions), servers)
	}
}

// TestReclaimFreedGPUsKeptForTheirJob: the 8 GPUs of server 1 are released
// at their deadline for job 18 (8 GPUs, guaranteed); job 17 (1 GPU,
// guaranteed, older) waits for a GPU being freed for it on server 2, later.
// Both are jobs GPUs are being freed for, so job 17 comes first in the
// queue: the released GPUs were free for it to take, job 18 then found no
// whole server and needed a second reclaim and a second grace period (the
// ITP replay's waits of 37-60 s). The released GPUs are kept for the job
// they were freed for until its turn.
func TestReclaimFreedGPUsKeptForTheirJob(t *testing.T) {
	w := domaintest.NewWorld(t, domaintest.DGX(1, 2)).Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
		Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).Tenant(domaintest.MakeTenant("c").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(8).Lend(8)).Workspace(domaintest.MakeWorkspace("c", "w").Guaranteed(2).Lend(2)).
		Workspace(domaintest.MakeWorkspace("b", "w").Borrow(16))
	for i := 0; i < 16; i++ {
		w.Running(domaintest.MakeJob("b/w", 1).Preemptible(), domaintest.On(fmt.Sprintf("s1-gpu%03d", 1+i/8), i%8))
		w.PlacedAgo(uint64(i+1), time.Hour)
	}
	stopping := func(forJob uint64, by time.Time) func(*domain.Job) {
		return func(j *domain.Job) { j.State, j.PreemptedFor, j.StopDeadline = domain.JobPreempting, forJob, &by }
	}
	for id := uint64(1); id <= 8; id++ {
		w.With(id, stopping(18, now)) // due now
	}
	w.With(9, stopping(17, now.Add(20*time.Second)))
	w.Pending(domaintest.MakeJob("c/w", 1)) // 17
	w.Pending(domaintest.MakeJob("a/w", 8)) // 18
	p := Schedule(snapshotOf(w), now)
	if len(p.Releases) != 8 {
		t.Fatalf("releases %+v, want the 8 victims due", p.Releases)
	}
	if !placedIn(p, 18) {
		t.Errorf("job 18 not placed on the GPUs freed for it: pending %+v, placements %+v", p.Pending.Of(18), p.Placements)
	}
	if len(p.Preemptions) != 0 {
		t.Errorf("preemptions %+v: nothing more needs freeing", p.Preemptions)
	}
	if r := p.Pending.Of(17); r.Code != ReasonReclaim {
		t.Errorf("job 17: %+v, want it waiting for its own GPU (%s)", r, ReasonReclaim)
	}
}

// TestGuaranteedJobNotHeldBackByHeadOfLine: workspace a/w (17 guaranteed)
// queues a 16-GPU gang of whole servers, which no server can hold (each has
// one GPU of b's guaranteed work, which no reclaim may take), then a 1-GPU
// job. Both fit in the guarantee counted over the queue, so the small job
// takes nothing the gang is owed; it waited behind the gang ("queued
// behind") for as long as the gang did (hours in the ITP replay at 32x8).
func TestGuaranteedJobNotHeldBackByHeadOfLine(t *testing.T) {
	w := domaintest.NewWorld(t, domaintest.DGX(1, 4)).Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
		Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(17).Borrow(8)).Workspace(domaintest.MakeWorkspace("b", "w").Guaranteed(8))
	for i := 0; i < 4; i++ {
		w.Running(domaintest.MakeJob("b/w", 1), domaintest.On(fmt.Sprintf("s1-gpu%03d", 1+i), 0))
	}
	w.Pending(domaintest.MakeJob("a/w", 16).PerNode(8)) // 5: within, unplaceable
	w.Pending(domaintest.MakeJob("a/w", 1))             // 6: within
	w.Pending(domaintest.MakeJob("a/w", 2))             // 7: borrows: held back
	p := Schedule(snapshotOf(w), now)
	if !placedIn(p, 6) {
		t.Errorf("job 6 (within the guarantee) not placed: %+v", p.Pending.Of(6))
	}
	if r := p.Pending.Of(7); r.Code != ReasonGangOrder {
		t.Errorf("job 7 (borrowing): %+v, want it held back behind job 5 (%s)", r, ReasonGangOrder)
	}
}

// TestReclaimLeftoverNotTakenByJobStillFreeing: job 3 (4 GPUs) is placed
// at the deadline of the 8-GPU victim freed for it on server 1, leaving 4
// GPUs over; job 4 (4 GPUs, guaranteed, no victims of its own) waits for
// them. Job 5's own victim on server 2 stops in 26 s. Job 5 ranked before
// job 4 (GPUs are being freed for it) and was placed now on the leftover
// GPUs, so job 4 waited for job 5's victim, past its grace period (the ITP
// replay's waits of 33-58 s). Job 5 waits for its own GPUs.
func TestReclaimLeftoverNotTakenByJobStillFreeing(t *testing.T) {
	w := domaintest.NewWorld(t, domaintest.DGX(1, 2)).Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
		Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(16).Lend(16)).Workspace(domaintest.MakeWorkspace("b", "w").Borrow(16))
	w.Running(domaintest.MakeJob("b/w", 8).Preemptible(), domaintest.On("s1-gpu001", domaintest.Seq(0, 8)...)) // 1
	w.Running(domaintest.MakeJob("b/w", 8).Preemptible(), domaintest.On("s1-gpu002", domaintest.Seq(0, 8)...)) // 2
	w.PlacedAgo(1, time.Hour).PlacedAgo(2, time.Hour)
	stopping := func(forJob uint64, by time.Time) func(*domain.Job) {
		return func(j *domain.Job) { j.State, j.PreemptedFor, j.StopDeadline = domain.JobPreempting, forJob, &by }
	}
	w.With(1, stopping(3, now)).With(2, stopping(5, now.Add(26*time.Second)))
	w.Pending(domaintest.MakeJob("a/w", 4)).Pending(domaintest.MakeJob("a/w", 4)).Pending(domaintest.MakeJob("a/w", 4)) // 3, 4, 5
	p := Schedule(snapshotOf(w), now)
	if !placedIn(p, 3) || !placedIn(p, 4) {
		t.Fatalf("placements %+v, pending %+v: want jobs 3 and 4 placed on server 1", p.Placements, p.Pending)
	}
	if placedIn(p, 5) || p.Pending.Of(5).Code != ReasonReclaim || len(p.Preemptions) != 0 {
		t.Fatalf("job 5: %+v, preemptions %+v; want it waiting for its own victim, nothing more preempted", p.Pending.Of(5), p.Preemptions)
	}
}

// TestReclaimEmptiesAWholeNVLinkDomain: a gang of 8 GPUs that requires one
// NVLink domain (2 servers of 4 GPUs) and is within its guarantee; the
// borrower holds all 16 GPUs, 8 of them borrowed. Its cheapest jobs are on
// servers 2 and 3, one in each domain: emptying those is within what it
// borrowed but serves no domain. Reclaim must empty one whole domain.
func TestReclaimEmptiesAWholeNVLinkDomain(t *testing.T) {
	w := domaintest.NewWorld(t, topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 4, NVLinkDomainSize: 8}).
		Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(8).Lend(8)).Workspace(domaintest.MakeWorkspace("b", "w").Guaranteed(8).Borrow(8))
	for i := 0; i < 16; i++ {
		srv := 1 + i/4
		w.Running(domaintest.MakeJob("b/w", 1).Preemptible(), domaintest.On(fmt.Sprintf("s1-gpu%03d", srv), i%4))
		ago := 3 * time.Hour // servers 1 and 4: costly
		if srv == 2 || srv == 3 {
			ago = 10 * time.Minute
		}
		w.PlacedAgo(uint64(i+1), ago)
	}
	w.Pending(domaintest.MakeJob("a/w", 8).PerNode(4).Topology(LevelNVLinkDomain, true)) // 17
	p := Schedule(snapshotOf(w), now)
	if r := p.Pending.Of(17); r.Code != ReasonReclaim {
		t.Fatalf("job 17: %+v, want %s", r, ReasonReclaim)
	}
	domains := map[string]bool{}
	for _, pr := range p.Preemptions {
		for _, pl := range w.Job(pr.JobID).Placement {
			domains[pl.NVLinkDomain] = true
		}
	}
	if len(p.Preemptions) != 8 || len(domains) != 1 {
		t.Fatalf("%d victims in domains %v, want the 8 jobs of one domain", len(p.Preemptions), domains)
	}
}
