package slurm_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/slurm"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// nodeStatePair is a real slurmctld and jobfabric on 4 servers x 8 GPUs
// (workspace gpu, 32 GPUs guaranteed), with a bridge that hands a job
// back after stuckAfter, and helpers to drive them.
type nodeStatePair struct {
	pair
	t      *testing.T
	ctx    context.Context
	bridge *slurm.Bridge
	total  slurm.Stats
}

func startNodeStatePair(t *testing.T, ctx context.Context, stuckAfter time.Duration) *nodeStatePair {
	// Slurm schedules on events and every sched_interval: every 2 s here.
	p := startPair(t, ctx, 1, 4, "gpu", 32, "SchedulerParameters=sched_interval=2")
	b, err := slurm.New(slurm.Config{Cluster: p.sc.Name, Slurm: p.sc, API: p.runtime, StuckAfter: stuckAfter,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return &nodeStatePair{pair: p, t: t, ctx: ctx, bridge: b}
}

func (p *nodeStatePair) pass() {
	p.t.Helper()
	st, err := p.bridge.Sync(p.ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	p.total.Submitted += st.Submitted
	p.total.Released += st.Released
	p.total.Rejected += st.Rejected
}

func (p *nodeStatePair) scontrol(args ...string) {
	p.t.Helper()
	if _, err := p.sc.Command(p.ctx, "scontrol", args...); err != nil {
		p.t.Fatal(err)
	}
}

// servers are the jobfabric servers (the Slurm nodes), in order.
func (p *nodeStatePair) servers() []domain.NodeView {
	p.t.Helper()
	ns, err := p.admin.Nodes(p.ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	return ns
}

func (p *nodeStatePair) job(slurmID string) *domain.Job {
	p.t.Helper()
	j, err := p.admin.JobByExternalID(p.ctx, slurm.ExternalID(p.sc.Name, slurmID), "acme")
	if err != nil {
		p.t.Fatal(err)
	}
	return j
}

// allocated maps the allocated Slurm jobs to their node lists.
func (p *nodeStatePair) allocated() map[string]string {
	p.t.Helper()
	out, err := p.sc.Command(p.ctx, "squeue", "-h", "-t", "CONFIGURING,RUNNING", "-o", "%i %N")
	if err != nil {
		p.t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if id, node, ok := strings.Cut(l, " "); ok {
			got[id] = node
		}
	}
	return got
}

func (p *nodeStatePair) queue() string {
	out, err := p.sc.Command(p.ctx, "squeue", "-h", "-t", "all", "-o", "%i %T %r %N")
	if err != nil {
		return err.Error()
	}
	return string(out)
}

// TestBridgeKeepsJobsOffNodesSlurmCannotUse: a node set DOWN in Slurm
// (scontrol update state=down reason=...) is cordoned in jobfabric with
// Slurm's state and reason, so of four one-node jobs on four servers
// three are placed, released and allocated on the other servers and the
// fourth waits in jobfabric, not released onto the down node; resumed in
// Slurm, the node is uncordoned and the fourth job runs there. (The
// bridge before it released the fourth job onto the down node, where it
// stayed PENDING, ReqNodeNotAvail, while jobfabric showed it Ready.)
func TestBridgeKeepsJobsOffNodesSlurmCannotUse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := startNodeStatePair(t, ctx, time.Minute)
	servers := p.servers()
	down := servers[1].Name
	p.scontrol("update", "nodename="+down, "state=down", "reason=bad PSU")
	if err := p.sbatchHeld(ctx, 4, func(int) []string { return []string{"-N", "1", "--gres=gpu:8"} }); err != nil {
		t.Fatal(err)
	}
	p.sc.Poll(t, "three jobs were not allocated", func() (bool, string) {
		p.pass()
		a := p.allocated()
		return len(a) == 3, fmt.Sprintf("%+v %v\n%s", p.total, a, p.queue())
	})
	for id, node := range p.allocated() {
		if node == down {
			t.Errorf("slurm job %s runs on %s, which Slurm has down", id, down)
		}
	}
	var waiting []string
	for _, n := range p.servers() {
		if n.Name != down {
			if !n.Condition.Schedulable() {
				t.Errorf("%s is %+v, Slurm can use it", n.Name, n.Condition)
			}
			continue
		}
		c := n.Condition
		if !c.Cordoned || c.Runtime != "slurm:"+p.sc.Name || !strings.Contains(c.Reason, "is DOWN") || !strings.Contains(c.Reason, "bad PSU") {
			t.Errorf("the down node's condition %+v, want cordoned by slurm:%s with Slurm's state and reason", c, p.sc.Name)
		}
	}
	for id := 1; id <= 4; id++ {
		if j := p.job(fmt.Sprint(id)); j.State == domain.JobPending {
			waiting = append(waiting, fmt.Sprint(id))
		}
	}
	if len(waiting) != 1 || p.total.Released != 3 {
		t.Fatalf("jobfabric jobs pending %v, released %d: want the fourth waiting", waiting, p.total.Released)
	}

	p.scontrol("update", "nodename="+down, "state=resume")
	p.sc.Poll(t, "the fourth job did not run on the resumed node", func() (bool, string) {
		p.pass()
		a := p.allocated()
		return a[waiting[0]] == down, fmt.Sprintf("%+v %v\n%s", p.total, a, p.queue())
	})
	for _, n := range p.servers() {
		if n.Name == down && !n.Condition.Schedulable() {
			t.Errorf("resumed in Slurm, %s is still %+v", down, n.Condition)
		}
	}
}

// TestBridgeMovesAJobStuckOnItsNode: jobfabric placed a job on a node
// Slurm shows usable but will not start it on (a maintenance
// reservation); released there, the job stays PENDING (ReqNodeNotAvail).
// After StuckAfter the bridge holds it again and hands it back: jobfabric
// requeues it (Pending, one requeue, not failed, the reason naming the
// node and Slurm's), places it on another server, and the bridge releases
// it there, where Slurm runs it. (The bridge before it left the job
// pending forever while jobfabric showed it Ready.)
func TestBridgeMovesAJobStuckOnItsNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := startNodeStatePair(t, ctx, 3*time.Second)
	if err := p.sbatchHeld(ctx, 1, func(int) []string { return []string{"-N", "1", "--gres=gpu:8"} }); err != nil {
		t.Fatal(err)
	}
	var first string
	p.sc.Poll(t, "the job was not placed", func() (bool, string) {
		p.pass()
		live, err := p.admin.Jobs(ctx, client.JobQuery{States: []domain.JobState{domain.JobReady}})
		if err != nil || len(live) != 1 {
			return false, fmt.Sprint(live, err)
		}
		first = slurm.PlacedNodes(&live[0])[0]
		return true, ""
	})
	// Before the pass that releases it, Slurm reserves its node.
	p.scontrol("create", "reservation", "reservationname=maint", "starttime=now", "duration=60", "nodes="+first, "flags=maint,ignore_jobs", "users=root")
	var placedAgain string
	p.sc.Poll(t, "the stuck job did not run elsewhere", func() (bool, string) {
		p.pass()
		j := p.job("1")
		a := p.allocated()
		if j.Requeues == 1 && j.State == domain.JobReady {
			placedAgain = slurm.PlacedNodes(j)[0]
		}
		return placedAgain != "" && a["1"] == placedAgain, fmt.Sprintf("%+v job %s requeues %d on %v, slurm %v\n%s", p.total, j.State, j.Requeues, slurm.PlacedNodes(j), a, p.queue())
	})
	if placedAgain == first || p.total.Rejected != 1 || p.total.Released != 2 {
		t.Errorf("placed on %s then %s; stats %+v: want one hand-back and two releases", first, placedAgain, p.total)
	}
	j := p.job("1")
	if j.State == domain.JobFailed || j.Requeues != 1 || len(j.Runs) != 2 || j.Runs[0].End == nil {
		t.Errorf("job %+v runs %+v: want requeued once, not failed", j, j.Runs)
	}
	events, err := p.admin.Events(ctx, client.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e domain.Event) bool {
		return e.Action == "job.report" && strings.Contains(e.Message, "rejected") && strings.Contains(e.Message, "ReqNodeNotAvail") && strings.Contains(e.Message, first)
	}) {
		t.Errorf("no rejected report naming %s and Slurm's reason among the events", first)
	}
	for _, n := range p.servers() {
		if n.Name == first && (n.Condition.Schedulable() || !strings.Contains(n.Condition.Reason, "stayed pending")) {
			t.Errorf("%s, the node the job stayed pending for, is %+v: want cordoned a while", first, n.Condition)
		}
	}
}

// TestBridgeCordonsANodeWhileItsReservationLasts: as in
// TestBridgeMovesAJobStuckOnItsNode, a maintenance reservation keeps a
// released job pending on its node and the bridge moves it; the node is
// cordoned with the reservation's name and end, and stays cordoned past
// the fixed 10 x StuckAfter while the reservation lasts (the bridge's
// clock is a fake one, moved on); deleted in Slurm, the reservation's
// cordon ends at the next pass. scontrol show reservation is read only in
// passes with a stuck job or a reserved node, at most once each. (The
// bridge before it ended the cordon after 10 x StuckAfter whatever the
// reservation did, and never read it.)
func TestBridgeCordonsANodeWhileItsReservationLasts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const stuckAfter = 3 * time.Second
	p := startPair(t, ctx, 1, 4, "gpu", 32, "SchedulerParameters=sched_interval=2")
	clock := tstime.NewFake(time.Now())
	run := &countingRunner{Runner: p.sc}
	b, err := slurm.New(slurm.Config{Cluster: p.sc.Name, Slurm: run, API: p.runtime, StuckAfter: stuckAfter, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	pass := func() slurm.Stats {
		t.Helper()
		before := run.count("scontrol show reservation")
		st, err := b.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := run.count("scontrol show reservation") - before; n > 1 {
			t.Fatalf("a pass read the reservations %d times", n)
		}
		return st
	}
	condition := func(server string) domain.NodeCondition {
		ns, err := p.admin.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			if n.Name == server {
				return n.Condition
			}
		}
		t.Fatalf("no server %s", server)
		return domain.NodeCondition{}
	}
	if err := p.sbatchHeld(ctx, 1, func(int) []string { return []string{"-N", "1", "--gres=gpu:8"} }); err != nil {
		t.Fatal(err)
	}
	job := func() *domain.Job {
		j, err := p.admin.JobByExternalID(ctx, slurm.ExternalID(p.sc.Name, "1"), "acme")
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	var first string
	p.sc.Poll(t, "the job was not placed", func() (bool, string) {
		pass()
		if j := job(); j.State == domain.JobReady {
			first = slurm.PlacedNodes(j)[0]
		}
		return first != "", string(job().State)
	})
	if _, err := p.sc.Command(ctx, "scontrol", "create", "reservation", "reservationname=maint", "starttime=now", "duration=60", "nodes="+first, "flags=maint,ignore_jobs", "users=root"); err != nil {
		t.Fatal(err)
	}
	rejected := 0
	p.sc.Poll(t, "the stuck job was not handed back", func() (bool, string) {
		rejected += pass().Rejected
		clock.Advance(time.Second)
		return rejected == 1, fmt.Sprintf("job %s on %v", job().State, slurm.PlacedNodes(job()))
	})
	if n := run.count("scontrol show reservation"); n == 0 {
		t.Fatal("the bridge never read the reservations")
	}
	if c := condition(first); c.Schedulable() || !strings.Contains(c.Reason, "reserved (maint) until") {
		t.Fatalf("%s is %+v: want cordoned, naming the reservation", first, c)
	}
	clock.Advance(suspectFor * stuckAfter)
	pass()
	if c := condition(first); c.Schedulable() {
		t.Fatalf("%s uncordoned after 10 x StuckAfter though its reservation lasts: %+v", first, c)
	}
	if _, err := p.sc.Command(ctx, "scontrol", "delete", "reservationname=maint"); err != nil {
		t.Fatal(err)
	}
	pass()
	if c := condition(first); !c.Schedulable() {
		t.Errorf("the reservation is deleted, yet %s is %+v", first, c)
	}
	// Nothing stuck, nothing reserved: the reservations are not read.
	before := run.count("scontrol show reservation")
	pass()
	if n := run.count("scontrol show reservation") - before; n != 0 {
		t.Errorf("a quiet pass read the reservations %d times", n)
	}
}

// suspectFor mirrors the bridge's fixed cordon (10 x StuckAfter).
const suspectFor = 10

// countingRunner counts the Slurm commands a bridge runs.
type countingRunner struct {
	slurm.Runner
	mu    sync.Mutex
	calls []string
}

func (r *countingRunner) Command(ctx context.Context, name string, args ...string) ([]byte, error) {
	r.mu.Lock()
	r.calls = append(r.calls, name+" "+strings.Join(args, " "))
	r.mu.Unlock()
	return r.Runner.Command(ctx, name, args...)
}

func (r *countingRunner) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}
