package slurm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// recorded answers Slurm commands with outputs recorded from slurmctld
// 22.05 and keeps the command lines it was given.
type recorded struct {
	mu    sync.Mutex
	files map[string]string // command line: testdata file ("" answers nothing)
	calls []string
}

func (r *recorded) Command(_ context.Context, name string, args ...string) ([]byte, error) {
	line := name + " " + strings.Join(args, " ")
	r.mu.Lock()
	r.calls = append(r.calls, line)
	r.mu.Unlock()
	file, ok := r.files[line]
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: no recorded output", line)
	case file == "":
		return nil, nil
	}
	b, err := readFile(file)
	return b, err
}

// Pipe answers each line of stdin as a command of its own, and fails when
// one does (scontrol exits 1 when any command failed).
func (r *recorded) Pipe(ctx context.Context, stdin string, name string, args ...string) ([]byte, error) {
	r.mu.Lock()
	r.calls = append(r.calls, name+" <stdin>")
	r.mu.Unlock()
	var failed error
	for _, line := range strings.Split(strings.TrimSpace(stdin), "\n") {
		if _, err := r.Command(ctx, name, strings.Fields(line)...); err != nil {
			failed = err
		}
	}
	return nil, failed
}

func (r *recorded) count(prefix string) int {
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

// refusing is a jobfabric that holds no jobs and refuses tenants it does
// not know, as the server does.
type refusing struct {
	tenants   map[string]bool
	submitted []domain.JobSpec
	live      []domain.Job // what Jobs lists
	cancelled []uint64
	reports   []string // "ID state"
	messages  []string // the reports' messages
	nodes     []api.RuntimeNodesRequest
	// pools are jobfabric's pools; poolCalls the bridge's writes ("set
	// NAME a,b", "delete NAME"); oldRules refuses them as a cluster below
	// apply rules 5 does.
	pools     map[string][]string
	poolCalls []string
	oldRules  bool
}

func (a *refusing) Jobs(context.Context, client.JobQuery) ([]domain.Job, error) { return a.live, nil }
func (a *refusing) JobByExternalID(_ context.Context, ext, _ string) (*domain.Job, error) {
	return nil, domain.NotFound("job with externalId", ext)
}
func (a *refusing) SubmitJob(_ context.Context, s domain.JobSpec) (*domain.Job, error) {
	if !a.tenants[s.Tenant] {
		return nil, domain.NotFound("tenant", s.Tenant)
	}
	a.submitted = append(a.submitted, s)
	return &domain.Job{ID: uint64(len(a.submitted)), JobSpec: s, State: domain.JobPending}, nil
}
func (a *refusing) CancelJob(_ context.Context, id uint64) (*domain.Job, error) {
	a.cancelled = append(a.cancelled, id)
	return &domain.Job{ID: id, State: domain.JobCancelled}, nil
}
func (a *refusing) Workspace(_ context.Context, tenant, name string) (*domain.Workspace, error) {
	if !a.tenants[tenant] {
		return nil, domain.NotFound("workspace", domain.Ref(tenant, name))
	}
	return &domain.Workspace{Tenant: tenant, Name: name}, nil
}
func (a *refusing) Report(_ context.Context, id uint64, state, msg string) (*domain.Job, error) {
	a.reports = append(a.reports, fmt.Sprintf("%d %s", id, state))
	a.messages = append(a.messages, msg)
	return &domain.Job{ID: id}, nil
}
func (a *refusing) ReportRuntimeNodes(_ context.Context, req api.RuntimeNodesRequest) ([]domain.NodeCondition, error) {
	a.nodes = append(a.nodes, req)
	return nil, nil
}

func (a *refusing) Pools(context.Context) ([]api.Pool, error) {
	out := []api.Pool{}
	for _, n := range slices.Sorted(maps.Keys(a.pools)) {
		out = append(out, api.Pool{Name: n, Servers: a.pools[n]})
	}
	return out, nil
}
func (a *refusing) SetPool(_ context.Context, name string, servers []string) (*api.Pool, error) {
	if a.oldRules {
		return nil, domain.Errorf(domain.CodeFailedPrecondition, "the cluster applies rules 4: server pools need 5")
	}
	if a.pools == nil {
		a.pools = map[string][]string{}
	}
	a.pools[name] = slices.Sorted(slices.Values(servers))
	a.poolCalls = append(a.poolCalls, "set "+name+" "+strings.Join(a.pools[name], ","))
	return &api.Pool{Name: name, Servers: a.pools[name]}, nil
}
func (a *refusing) SetJobPool(_ context.Context, id uint64, pool string) (*domain.Job, error) {
	a.poolCalls = append(a.poolCalls, fmt.Sprintf("job %d %s", id, pool))
	for i := range a.live {
		if a.live[i].ID == id {
			a.live[i].Pool = pool
			return &a.live[i], nil
		}
	}
	return nil, domain.NotFound("job", fmt.Sprint(id))
}
func (a *refusing) DeletePool(_ context.Context, name string) (*api.Pool, error) {
	if _, ok := a.pools[name]; !ok {
		return nil, domain.NotFound("pool", name)
	}
	delete(a.pools, name)
	a.poolCalls = append(a.poolCalls, "delete "+name)
	return &api.Pool{Name: name}, nil
}

func newRecorded() *recorded {
	return &recorded{files: map[string]string{
		"squeue " + strings.Join(squeueArgs, " "):                             "squeue.txt",
		"scontrol show job -o 3":                                              "show-job-3.txt",
		"scontrol update JobId=2 Comment=jobfabric: tenant \"zzz\" not found": "",
	}}
}

// TestSyncRecorded makes a pass over the recorded queue without a mapping:
// the --gpus job is read with scontrol and submitted with its GPUs on one
// server and its time limit; the account without a tenant gets jobfabric's
// refusal as its comment; ended and running jobs are left alone.
func TestSyncRecorded(t *testing.T) {
	run, jf := newRecorded(), &refusing{tenants: map[string]bool{"acme": true}}
	st := syncOnce(t, run, jf)
	if st != (Stats{Submitted: 1, Held: 1}) {
		t.Errorf("stats %+v, want 1 submitted, 1 held; commands %q", st, run.calls)
	}
	want := domain.JobSpec{Tenant: "acme", Workspace: "gpu", GPUs: 4, GPUsPerNode: 4, TimeLimitSeconds: 2700, ExternalID: "slurm:jftest:3", Preemptible: true}
	if len(jf.submitted) != 1 || fmt.Sprint(jf.submitted[0]) != fmt.Sprint(want) {
		t.Errorf("submitted %+v, want %+v", jf.submitted, want)
	}
	if n := run.count("scontrol update JobId=2 Comment="); n != 1 {
		t.Errorf("%d comments on the refused job, want 1: %v", n, run.calls)
	}
	if n := run.count("scontrol release"); n != 0 {
		t.Errorf("released %d jobs, none is Ready", n)
	}
}

func TestNewRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"no cluster":  {Config{Slurm: newRecorded(), API: &refusing{}}, "cluster name is required"},
		"bad cluster": {Config{Cluster: "a b", Slurm: newRecorded(), API: &refusing{}}, "printable ASCII without spaces"},
		"no runner":   {Config{Cluster: "c", API: &refusing{}}, "a Slurm runner and a jobfabric API are required"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRunPassesOnTicks: Run makes a pass at once, then one per tick of its
// clock, and stops with its context.
func TestRunPassesOnTicks(t *testing.T) {
	run := newRecorded()
	clock := tstime.NewFake(time.Unix(0, 0))
	b, err := New(Config{Cluster: "jftest", Slurm: run, API: &refusing{tenants: map[string]bool{"acme": true}}, Interval: 5 * time.Second, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	if err := clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second) // returns once the first pass is over
	clock.Advance(5 * time.Second) // and the second
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	if n := run.count("squeue"); n < 2 || n > 3 {
		t.Errorf("%d passes after two ticks, want 2 or 3", n)
	}
}

// TestSyncEndsJobsGoneFromSlurm: a live jobfabric job of this cluster whose
// Slurm job squeue no longer shows is cancelled; one squeue still shows,
// one of another cluster and one of no runtime are left alone.
func TestSyncEndsJobsGoneFromSlurm(t *testing.T) {
	live := func(id uint64, ext string, state domain.JobState) domain.Job {
		return domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: "acme", Workspace: "gpu", GPUs: 8, ExternalID: ext}, State: state, SubmittedBy: "runtime:bridge"}
	}
	onN1N3 := live(1, "slurm:jftest:1", domain.JobReady) // shown, CONFIGURING on its placement
	onN1N3.Placement = []domain.Placement{{Server: "n1"}, {Server: "n3"}}
	jf := &refusing{tenants: map[string]bool{"acme": true}, live: []domain.Job{
		onN1N3,
		live(2, "slurm:jftest:99", domain.JobPending), // gone
		live(3, "slurm:other:99", domain.JobPending),  // another cluster
		live(4, "", domain.JobPending),
		live(5, "slurm:jftest:3", domain.JobPending), // shown, held
	}}
	run := newRecorded()
	st := syncOnce(t, run, jf)
	if fmt.Sprint(jf.cancelled) != "[2]" || st.Cancelled != 1 {
		t.Errorf("cancelled %v (stats %+v), want job 2 only", jf.cancelled, st)
	}
	if len(jf.submitted) != 0 {
		t.Errorf("submitted %v: slurm job 3 already has job 5", jf.submitted)
	}
	if n := run.count("scontrol requeuehold") + run.count("scancel"); n != 0 || st.Misplaced != 0 {
		t.Errorf("slurm job 1 runs on its placement, yet the bridge stopped it: %q", run.calls)
	}
}

// TestSyncReleasesReadyJobs: held jobs whose jobfabric jobs are Ready get
// their placement as ReqNodeList and one release command; when it fails
// (one job cannot be released) each is released alone and only the good
// one counts.
func TestSyncReleasesReadyJobs(t *testing.T) {
	ready := func(id uint64, ext string, servers ...string) domain.Job {
		j := domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: "acme", Workspace: "gpu", GPUs: 8 * len(servers), ExternalID: ext}, State: domain.JobReady, SubmittedBy: "runtime:bridge"}
		for _, s := range servers {
			j.Placement = append(j.Placement, domain.Placement{Server: s, GPUs: []int{0, 1}}, domain.Placement{Server: s, GPUs: []int{2}})
		}
		return j
	}
	for name, tc := range map[string]struct {
		batchFails bool
		released   int
	}{
		"one command":     {false, 2},
		"one job refused": {true, 1},
	} {
		t.Run(name, func(t *testing.T) {
			// Slurm job 2 runs under account zzz: its mirror is zzz's.
			zzz := ready(7, "slurm:jftest:2", "n2")
			zzz.Tenant = "zzz"
			// A bridge with an admin token: its mirrors are the admin's.
			byAdmin := ready(8, "slurm:jftest:3", "n0", "n1")
			byAdmin.SubmittedBy = "admin:root"
			jf := &refusing{live: []domain.Job{zzz, byAdmin}}
			run := newRecorded()
			run.files["scontrol update JobId=2 ReqNodeList=n2 NumNodes=1 Comment=jobfabric_job_7_run_0"] = ""
			run.files["scontrol update JobId=3 ReqNodeList=n0,n1 NumNodes=2 Comment=jobfabric_job_8_run_0"] = ""
			run.files["scontrol release 2"] = ""
			if !tc.batchFails {
				run.files["scontrol release 2,3"] = ""
			}
			st := syncOnce(t, run, jf)
			if st.Released != tc.released || st.Submitted != 0 {
				t.Errorf("stats %+v, want %d released, none submitted; commands %q", st, tc.released, run.calls)
			}
			if n := run.count("scontrol update"); n != 2 {
				t.Errorf("%d updates, want 2: %q", n, run.calls)
			}
		})
	}
}

// TestSyncPreemptsAtTheDeadline: a Slurm job whose jobfabric job is
// Preempting runs on through the grace period; at the deadline it is
// requeued held when the job is preemptible, else cancelled, and the job
// reported stopped.
func TestSyncPreemptsAtTheDeadline(t *testing.T) {
	for name, tc := range map[string]struct {
		preemptible bool
		command     string
	}{
		"requeue": {true, "scontrol requeuehold 1"},
		"cancel":  {false, "scancel 1"},
	} {
		t.Run(name, func(t *testing.T) {
			clock := tstime.NewFake(time.Unix(1000, 0))
			deadline := clock.Now().Add(30 * time.Second)
			jf := &refusing{tenants: map[string]bool{"acme": true}, live: []domain.Job{{ID: 9,
				JobSpec: domain.JobSpec{Tenant: "acme", Workspace: "gpu", GPUs: 16, ExternalID: "slurm:jftest:1", Preemptible: tc.preemptible},
				State:   domain.JobPreempting, SubmittedBy: "runtime:bridge",
				Placement: []domain.Placement{{Server: "n1"}, {Server: "n3"}}, StopDeadline: &deadline}}}
			run := newRecorded()
			run.files[tc.command] = ""
			b, err := New(Config{Cluster: "jftest", Slurm: run, API: jf, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if st, err := b.Sync(t.Context()); err != nil || st.Preempted != 0 || run.count(tc.command) != 0 {
				t.Fatalf("within the grace period: %+v, %v, commands %q", st, err, run.calls)
			}
			clock.Advance(30 * time.Second)
			st, err := b.Sync(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if st.Preempted != 1 || run.count(tc.command) != 1 || fmt.Sprint(jf.reports) != "[9 stopped]" {
				t.Errorf("at the deadline: %+v, reports %v, commands %q; want %s and a stopped report", st, jf.reports, run.calls, tc.command)
			}
		})
	}
}

// TestSyncSignalsAtTheStartOfTheGracePeriod: a running Slurm job whose
// jobfabric job is Preempting is sent SIGTERM (scancel --signal=TERM
// --full: the batch script, its children and steps) at once, as Slurm's
// own preemption does, and marked (its comment); not again in the next
// pass even when the mark did not take, nor by a restarted bridge that
// reads the mark; at the deadline it is requeued held as before. A job
// still CONFIGURING has no processes: it is not signalled. Before, the
// bridge sent nothing until the deadline.
func TestSyncSignalsAtTheStartOfTheGracePeriod(t *testing.T) {
	clock := tstime.NewFake(time.Unix(1000, 0))
	deadline := clock.Now().Add(30 * time.Second)
	jf := &refusing{tenants: map[string]bool{"acme": true}, live: []domain.Job{{ID: 9,
		JobSpec: domain.JobSpec{Tenant: "acme", Workspace: "gpu", GPUs: 16, ExternalID: "slurm:jftest:1", Preemptible: true},
		State:   domain.JobPreempting, SubmittedBy: "runtime:bridge",
		Placement: []domain.Placement{{Server: "n1"}, {Server: "n3"}}, StopDeadline: &deadline}}}
	squeue := "squeue " + strings.Join(squeueArgs, " ")
	const signal, mark = "scancel --signal=TERM --full 1", "scontrol update JobId=1 Comment=jobfabric_job_9_run_0_term"
	newBridge := func(run Runner) *Bridge {
		b, err := New(Config{Cluster: "jftest", Slurm: run, API: jf, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// CONFIGURING (squeue.txt): nothing to signal yet.
	run := newRecorded()
	b := newBridge(run)
	if st, err := b.Sync(t.Context()); err != nil || st.Signalled != 0 || run.count("scancel") != 0 {
		t.Fatalf("configuring job: %+v, %v, commands %q; want no signal", st, err, run.calls)
	}
	// RUNNING: signalled once; the mark fails (no recorded answer), and
	// the next pass does not signal again.
	run.files[squeue] = "squeue-running.txt"
	run.files[signal] = ""
	for pass := range 2 {
		st, err := b.Sync(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := 1 - pass; st.Signalled != want || run.count(signal) != 1 || st.Preempted != 0 {
			t.Fatalf("pass %d in the grace period: %+v, commands %q; want the signal once, no requeue", pass, st, run.calls)
		}
	}
	if run.count(mark) != 1 {
		t.Errorf("the signalled job was not marked: %q", run.calls)
	}
	// A restarted bridge reads the mark.
	run2 := newRecorded()
	run2.files[squeue] = "squeue-running-term.txt"
	run2.files["scontrol requeuehold 1"] = ""
	b2 := newBridge(run2)
	if st, err := b2.Sync(t.Context()); err != nil || st.Signalled != 0 || run2.count("scancel") != 0 {
		t.Fatalf("restarted bridge: %+v, %v, commands %q; want no second signal", st, err, run2.calls)
	}
	clock.Advance(30 * time.Second)
	if st, err := b2.Sync(t.Context()); err != nil || st.Preempted != 1 || run2.count("scontrol requeuehold 1") != 1 || run2.count("scancel") != 0 {
		t.Fatalf("at the deadline: %+v, %v, commands %q; want one requeuehold", st, err, run2.calls)
	}
}

// TestSyncHoldsAReleasedJobRequeuedFirst: jobfabric requeued a job (run 1)
// whose Slurm job was released for run 0 but not yet allocated: the
// bridge holds it again (scontrol hold; requeuehold is for allocated
// jobs) and does not report it: jobfabric already requeued it.
func TestSyncHoldsAReleasedJobRequeuedFirst(t *testing.T) {
	jf := &refusing{tenants: map[string]bool{"acme": true}, live: []domain.Job{{ID: 9,
		JobSpec: domain.JobSpec{Tenant: "acme", Workspace: "gpu", GPUs: 8, ExternalID: "slurm:jftest:5", Preemptible: true},
		State:   domain.JobPending, Requeues: 1, SubmittedBy: "runtime:bridge"}}}
	run := newRecorded()
	run.files["squeue "+strings.Join(squeueArgs, " ")] = "squeue-released.txt"
	run.files["scontrol hold 5"] = ""
	st := syncOnce(t, run, jf)
	if st.Preempted != 1 || run.count("scontrol hold 5") != 1 || len(jf.reports) != 0 || len(jf.submitted) != 0 {
		t.Errorf("stats %+v, reports %v, submitted %v, commands %q; want one scontrol hold", st, jf.reports, jf.submitted, run.calls)
	}
}

// TestSyncIgnoresJobsThatTakeAnID: Slurm job ids are sequential, so a
// tenant can submit a job with the external id the bridge will give the
// next Slurm job, another tenant's. Such jobs (a user's, another tenant's
// user's, another tenant's runtime's) are never taken for the Slurm job's:
// its held job is not released onto their servers, its end is not
// reported on them, and the bridge submits the Slurm job's own job.
func TestSyncIgnoresJobsThatTakeAnID(t *testing.T) {
	squat := func(id uint64, tenant, by, ext string, state domain.JobState, server string) domain.Job {
		return domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: tenant, Workspace: "gpu", GPUs: 8, ExternalID: ext}, State: state,
			SubmittedBy: by, Placement: []domain.Placement{{Server: server, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	}
	jf := &refusing{tenants: map[string]bool{"acme": true}, live: []domain.Job{
		// Slurm job 3 is acme's, held.
		squat(20, "globex", "member:g1", "slurm:jftest:3", domain.JobReady, "n9"),
		squat(21, "acme", "member:a1", "slurm:jftest:3", domain.JobReady, "n8"),
		squat(22, "globex", "runtime:globex-rt", "slurm:jftest:3", domain.JobReady, "n7"),
		squat(25, "globex", "admin:root", "slurm:jftest:3", domain.JobReady, "n4"),
		// Slurm job 4 is acme's, cancelled.
		squat(23, "globex", "member:g1", "slurm:jftest:4", domain.JobRunning, "n6"),
		squat(24, "globex", "runtime:globex-rt", "slurm:jftest:4", domain.JobRunning, "n5"),
	}}
	run := newRecorded()
	st := syncOnce(t, run, jf)
	for _, c := range run.calls {
		if strings.Contains(c, "JobId=3 ") || strings.Contains(c, "release 3") {
			t.Errorf("slurm job 3 was released onto a job it is not: %q", c)
		}
	}
	if st.Released != 0 || len(jf.cancelled) != 0 || len(jf.reports) != 0 {
		t.Errorf("stats %+v, cancelled %v, reports %v: the bridge acted on jobs that are not its Slurm jobs'", st, jf.cancelled, jf.reports)
	}
	var ours []string
	for _, s := range jf.submitted {
		ours = append(ours, s.Tenant+" "+s.ExternalID)
	}
	if !slices.Contains(ours, "acme slurm:jftest:3") {
		t.Errorf("submitted %v: want acme's own job for slurm job 3", ours)
	}
}

// syncOnce makes one pass of a new bridge of cluster jftest over run's
// Slurm and jf's jobfabric.
func syncOnce(t *testing.T, run Runner, jf API) Stats {
	t.Helper()
	b, err := New(Config{Cluster: "jftest", Slurm: run, API: jf, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}
