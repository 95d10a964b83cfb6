package slurm

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// TestParseSinfoRecorded reads sinfo output recorded from slurmctld
// 22.05 after scontrol update state=down and state=drain (CLOUD nodes,
// powered down: the ~ suffix; gpu[2-3] in a second partition): nodes of
// one state and reason come as one hostlist; a node listed twice is kept
// once.
func TestParseSinfoRecorded(t *testing.T) {
	nodes, err := ParseSinfo(readTestdata(t, "sinfo.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes {
		got = append(got, n.Name+" "+n.Unusable()+" "+n.Reason)
	}
	want := []string{"gpu2 DRAINED drainit", "gpu0  ", "gpu3  ", "gpu1 DOWN maint x|y"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("nodes %q, want %q", got, want)
	}
	if nodes, err := ParseSinfo("p|n[1-2]|idle|none\nq|n2|down|x\nempty||n/a|none\n"); err != nil || len(nodes) != 2 ||
		fmt.Sprint(nodes[0].Partitions, nodes[1].Partitions) != "[p] [p q]" || nodes[1].State != "idle" {
		t.Errorf("a node listed twice, in two partitions: %+v, %v", nodes, err)
	}
	for _, bad := range []string{"gpu0 idle\n", "|n1|idle|none\n", "p|n[1-2]x[3]|idle|none\n", "n1|idle|none\n"} {
		if _, err := ParseSinfo(bad); err == nil {
			t.Errorf("%q was read", bad)
		}
	}
}

func TestNodeUnusable(t *testing.T) {
	for state, want := range map[string]string{
		"idle": "", "idle~": "", "mixed#": "", "allocated": "", "completing": "", "planned": "", "idle%": "", "reserved$": "",
		"down": "DOWN", "down~": "DOWN", "down*": "DOWN+NOT_RESPONDING", "drained": "DRAINED", "draining": "DRAINING",
		"drain*": "DRAIN+NOT_RESPONDING", "fail": "FAIL", "failing": "FAILING", "future": "FUTURE", "inval": "INVAL",
		"idle*": "IDLE+NOT_RESPONDING", "allocated*": "ALLOCATED+NOT_RESPONDING",
	} {
		if got := (Node{Name: "n", State: state}).Unusable(); got != want {
			t.Errorf("%s: %q, want %q", state, got, want)
		}
	}
}

// nodeBridge is a bridge of cluster jftest on a fake clock over run and jf,
// with Slurm's nodes as recorded (gpu1 down, gpu2 drained).
func nodeBridge(t *testing.T, run *recorded, jf API) (*Bridge, *tstime.Fake) {
	t.Helper()
	run.files["sinfo "+strings.Join(sinfoArgs, " ")] = "sinfo.txt"
	clock := tstime.NewFake(time.Unix(1000, 0))
	b, err := New(Config{Cluster: "jftest", Slurm: run, API: jf, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return b, clock
}

// TestSyncReportsSlurmsNodes: a pass tells jobfabric which nodes Slurm
// cannot use, with Slurm's state and reason, and which it can; a pass
// that finds the same says nothing; unreadable nodes decide nothing.
func TestSyncReportsSlurmsNodes(t *testing.T) {
	run, jf := newRecorded(), &refusing{tenants: map[string]bool{"acme": true}}
	b, _ := nodeBridge(t, run, jf)
	for range 2 {
		if _, err := b.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if len(jf.nodes) != 1 {
		t.Fatalf("%d node reports in two passes over the same nodes, want 1", len(jf.nodes))
	}
	want := api.RuntimeNodesRequest{Runtime: "slurm:jftest", Usable: []string{"gpu0", "gpu3"}, Unusable: []api.RuntimeNode{
		{Server: "gpu1", Reason: "slurm jftest: node gpu1 is DOWN: maint x|y"}, {Server: "gpu2", Reason: "slurm jftest: node gpu2 is DRAINED: drainit"}}}
	if fmt.Sprint(jf.nodes[0]) != fmt.Sprint(want) {
		t.Errorf("report %+v, want %+v", jf.nodes[0], want)
	}
	// gpu1 resumed: reported usable.
	run.files["sinfo "+strings.Join(sinfoArgs, " ")] = "sinfo-resumed.txt"
	if _, err := b.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(jf.nodes) != 2 || fmt.Sprint(jf.nodes[1].Usable) != "[gpu0 gpu1 gpu3]" || len(jf.nodes[1].Unusable) != 1 {
		t.Errorf("after gpu1 resumed: reports %+v", jf.nodes)
	}
	// sinfo fails: no report, the pass goes on.
	delete(run.files, "sinfo "+strings.Join(sinfoArgs, " "))
	if _, err := b.Sync(t.Context()); err != nil || len(jf.nodes) != 2 {
		t.Errorf("a pass without sinfo: %v, %d reports", err, len(jf.nodes))
	}
}

// ordered records the order of a fake jobfabric's node reports and job
// reports.
type ordered struct {
	refusing
	order []string
}

func (o *ordered) Report(ctx context.Context, id uint64, state, msg string) (*domain.Job, error) {
	o.order = append(o.order, "report "+state)
	return o.refusing.Report(ctx, id, state, msg)
}

func (o *ordered) ReportRuntimeNodes(ctx context.Context, req api.RuntimeNodesRequest) ([]domain.NodeCondition, error) {
	o.order = append(o.order, "nodes")
	return o.refusing.ReportRuntimeNodes(ctx, req)
}

// TestSyncRejectsAReadyJobOnNodesSlurmCannotUse: a held job whose
// jobfabric job is Ready on a node Slurm has down, or does not have at
// all, is not released (it would wait forever) but handed back: rejected,
// naming the node and Slurm's state, after the nodes are reported (so the
// next placement avoids them). The missing node is reported unusable.
func TestSyncRejectsAReadyJobOnNodesSlurmCannotUse(t *testing.T) {
	for name, tc := range map[string]struct {
		server, why string
	}{
		"down":    {"gpu1", "slurm job 3 not released: slurm jftest: node gpu1 is DOWN: maint x|y"},
		"missing": {"gpu9", "slurm job 3 not released: slurm jftest: node gpu9 is missing"},
	} {
		t.Run(name, func(t *testing.T) {
			jf := &ordered{refusing: refusing{tenants: map[string]bool{"acme": true}, live: []domain.Job{{ID: 9,
				JobSpec: domain.JobSpec{Tenant: "acme", Workspace: "gpu", GPUs: 4, ExternalID: "slurm:jftest:3"}, State: domain.JobReady,
				SubmittedBy: "runtime:bridge", Placement: []domain.Placement{{Server: tc.server, GPUs: []int{0, 1, 2, 3}}}}}}}
			run := newRecorded()
			b, _ := nodeBridge(t, run, jf)
			st, err := b.Sync(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if st.Rejected != 1 || st.Released != 0 || run.count("scontrol update JobId=3") != 0 || run.count("scontrol release") != 0 {
				t.Fatalf("stats %+v, commands %q: want job 3 handed back, not released", st, run.calls)
			}
			if fmt.Sprint(jf.reports) != "[9 rejected]" || !strings.HasPrefix(jf.messages[0], tc.why) {
				t.Errorf("reports %v %q, want 9 rejected: %q", jf.reports, jf.messages, tc.why)
			}
			if fmt.Sprint(jf.order) != "[nodes report rejected]" {
				t.Errorf("order %v: the nodes must be cordoned before the job is handed back", jf.order)
			}
			var unusable []string
			for _, n := range jf.nodes[0].Unusable {
				unusable = append(unusable, n.Server)
			}
			if !strings.Contains(fmt.Sprint(unusable), tc.server) {
				t.Errorf("unusable %v, want %s among them", unusable, tc.server)
			}
		})
	}
}

// TestSyncHandsBackAJobStuckOnItsNodes: a released job PENDING because
// of its nodes (ReqNodeNotAvail) is left to Slurm for StuckAfter (60s by
// default), then held again and handed back to jobfabric (rejected, with
// Slurm's reason and the node's state); a job pending for Resources is
// Slurm's to schedule and never handed back.
func TestSyncHandsBackAJobStuckOnItsNodes(t *testing.T) {
	onGPU1 := func(id uint64, ext string) domain.Job {
		return domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: "acme", Workspace: "gpu", GPUs: 8, ExternalID: ext}, State: domain.JobReady,
			SubmittedBy: "runtime:bridge", Placement: []domain.Placement{{Server: "gpu1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	}
	jf := &refusing{tenants: map[string]bool{"acme": true}, live: []domain.Job{onGPU1(9, "slurm:jftest:7"), onGPU1(10, "slurm:jftest:8")}}
	run := newRecorded()
	run.files["squeue "+strings.Join(squeueArgs, " ")] = "squeue-stuck.txt"
	run.files["scontrol hold 7"] = ""
	b, clock := nodeBridge(t, run, jf)
	pass := func() Stats {
		t.Helper()
		st, err := b.Sync(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	pass()
	clock.Advance(59 * time.Second)
	if st := pass(); st.Rejected != 0 || run.count("scontrol hold") != 0 || len(jf.reports) != 0 {
		t.Fatalf("after 59s: %+v, reports %v, commands %q: Slurm still has time", st, jf.reports, run.calls)
	}
	clock.Advance(time.Second)
	st := pass()
	if st.Rejected != 1 || run.count("scontrol hold 7") != 1 || fmt.Sprint(jf.reports) != "[9 rejected]" {
		t.Fatalf("after 60s: %+v, reports %v, commands %q: want slurm job 7 held and job 9 rejected", st, jf.reports, run.calls)
	}
	want := "slurm job 7 stayed pending 1m0s on gpu1: ReqNodeNotAvail, UnavailableNodes:gpu1 (slurm jftest: node gpu1 is DOWN: maint x|y)"
	if jf.messages[0] != want {
		t.Errorf("message %q, want %q", jf.messages[0], want)
	}
	// An hour on, the job pending for Resources is still Slurm's; job 7
	// (the fake shows it unchanged) starts a new wait, not a second report.
	clock.Advance(time.Hour)
	pass()
	if run.count("scontrol hold 8") != 0 || len(jf.reports) != 1 {
		t.Errorf("reports %v, commands %q: the job pending for Resources was handed back, or job 7 twice", jf.reports, run.calls)
	}
}

// TestSyncCordonsANodeAJobStayedPendingFor: Slurm shows gpu0 usable, yet
// the job released there stays pending for its nodes (a maintenance
// reservation, recorded from slurmctld 22.05). Handed back, its node is
// reported unusable with the job's reason, so jobfabric places it
// elsewhere, for 10 x StuckAfter; then usable again.
func TestSyncCordonsANodeAJobStayedPendingFor(t *testing.T) {
	jf := &refusing{tenants: map[string]bool{"acme": true}, live: []domain.Job{{ID: 9,
		JobSpec: domain.JobSpec{Tenant: "acme", Workspace: "gpu", GPUs: 8, ExternalID: "slurm:jftest:1"}, State: domain.JobReady,
		SubmittedBy: "runtime:bridge", Placement: []domain.Placement{{Server: "gpu0", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}}}
	run := newRecorded()
	run.files["squeue "+strings.Join(squeueArgs, " ")] = "squeue-reserved.txt"
	run.files["scontrol hold 1"] = ""
	b, clock := nodeBridge(t, run, jf)
	unusable := func() string {
		last := jf.nodes[len(jf.nodes)-1]
		var s []string
		for _, n := range last.Unusable {
			s = append(s, n.Server+": "+n.Reason)
		}
		return strings.Join(s, "; ")
	}
	for _, step := range []time.Duration{0, time.Minute} {
		clock.Advance(step)
		if _, err := b.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(jf.reports) != "[9 rejected]" {
		t.Fatalf("reports %v, want job 9 handed back", jf.reports)
	}
	if got := unusable(); !strings.Contains(got, "gpu0: slurm jftest: slurm job 1 stayed pending 1m0s for its nodes: ReqNodeNotAvail, May be reserved for other job") {
		t.Errorf("unusable %q: want gpu0 with the job's reason", got)
	}
	run.files["squeue "+strings.Join(squeueArgs, " ")] = "" // the job started elsewhere and ended
	clock.Advance(10 * time.Minute)
	if _, err := b.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := unusable(); strings.Contains(got, "gpu0") || !strings.Contains(fmt.Sprint(jf.nodes[len(jf.nodes)-1].Usable), "gpu0") {
		t.Errorf("after 10 minutes: unusable %q, reports %+v: want gpu0 usable again", got, jf.nodes[len(jf.nodes)-1])
	}
}

// TestReadNodesFallsBackToALinePerNode: a grouped hostlist the bridge
// cannot expand (two ranges in one name) is read again with -N, a line
// per node.
func TestReadNodesFallsBackToALinePerNode(t *testing.T) {
	run := newRecorded()
	run.files["sinfo "+strings.Join(sinfoArgs, " ")] = "sinfo-grid.txt"
	run.files["sinfo "+strings.Join(sinfoPerNodeArgs, " ")] = "sinfo-grid-n.txt"
	b, err := New(Config{Cluster: "c", Slurm: run, API: &refusing{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	v := b.readNodes(t.Context())
	if v == nil || len(v.known) != 4 || v.unusable["n1x2"] != "slurm c: node n1x2 is DOWN+NOT_RESPONDING: not responding" {
		t.Fatalf("view %+v", v)
	}
}

// flaky is a jobfabric whose node reports fail while down is set.
type flaky struct {
	refusing
	down bool
}

func (f *flaky) ReportRuntimeNodes(ctx context.Context, req api.RuntimeNodesRequest) ([]domain.NodeCondition, error) {
	if f.down {
		return nil, domain.Errorf(domain.CodeUnavailable, "no leader")
	}
	return f.refusing.ReportRuntimeNodes(ctx, req)
}

// TestSyncHandsBackOnlyOnceTheNodesAreCordoned: a job is handed back only
// after jobfabric has the cordons of the nodes Slurm cannot start it on,
// or jobfabric could place it on them again. While the node report fails,
// the job stays held (not released there either, even when the node is
// only a suspect that Slurm shows usable); once the report goes through,
// it is handed back.
func TestSyncHandsBackOnlyOnceTheNodesAreCordoned(t *testing.T) {
	onNode := func(server string) *flaky {
		return &flaky{down: true, refusing: refusing{tenants: map[string]bool{"acme": true}, live: []domain.Job{{ID: 9,
			JobSpec: domain.JobSpec{Tenant: "acme", Workspace: "gpu", GPUs: 8, ExternalID: "slurm:jftest:1"}, State: domain.JobReady,
			SubmittedBy: "runtime:bridge", Placement: []domain.Placement{{Server: server, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}}}}
	}
	t.Run("down node", func(t *testing.T) {
		jf := onNode("gpu1")
		run := newRecorded()
		run.files["squeue "+strings.Join(squeueArgs, " ")] = "squeue-reserved-held.txt"
		b, _ := nodeBridge(t, run, jf)
		st, err := b.Sync(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if st.Rejected != 0 || len(jf.reports) != 0 || run.count("scontrol release") != 0 || run.count("scontrol update JobId=1") != 0 {
			t.Fatalf("report failed: stats %+v, reports %v, commands %q: want job 1 kept held, not handed back", st, jf.reports, run.calls)
		}
		jf.down = false
		if st, err = b.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st.Rejected != 1 || fmt.Sprint(jf.reports) != "[9 rejected]" || len(jf.nodes) != 1 {
			t.Fatalf("report through: stats %+v, reports %v, node reports %d: want job 9 handed back after the cordon", st, jf.reports, len(jf.nodes))
		}
	})
	t.Run("suspect node", func(t *testing.T) {
		// gpu0 is usable in sinfo, but job 1 stayed pending for it.
		jf := onNode("gpu0")
		run := newRecorded()
		run.files["squeue "+strings.Join(squeueArgs, " ")] = "squeue-reserved.txt"
		run.files["scontrol hold 1"] = ""
		b, clock := nodeBridge(t, run, jf)
		for _, step := range []time.Duration{0, time.Minute} {
			clock.Advance(step)
			if _, err := b.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if run.count("scontrol hold 1") != 1 || len(jf.reports) != 0 {
			t.Fatalf("report failed: reports %v, commands %q: want job 1 held and not handed back", jf.reports, run.calls)
		}
		// Slurm now shows it held; jobfabric still has it Ready on gpu0.
		run.files["squeue "+strings.Join(squeueArgs, " ")] = "squeue-reserved-held.txt"
		clock.Advance(time.Minute)
		if _, err := b.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if run.count("scontrol release") != 0 || run.count("scontrol update JobId=1") != 0 || len(jf.reports) != 0 {
			t.Fatalf("report still failing: reports %v, commands %q: job 1 released onto the node it stayed pending for", jf.reports, run.calls)
		}
		jf.down = false
		clock.Advance(time.Minute)
		if _, err := b.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(jf.reports) != "[9 rejected]" || !strings.Contains(jf.messages[0], "stayed pending") {
			t.Fatalf("report through: reports %v %q: want job 9 handed back naming the wait", jf.reports, jf.messages)
		}
		last := jf.nodes[len(jf.nodes)-1]
		if len(last.Unusable) == 0 || !strings.Contains(fmt.Sprint(last.Unusable), "gpu0") {
			t.Errorf("node report %+v: want gpu0 cordoned", last)
		}
	})
}
