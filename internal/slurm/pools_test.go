package slurm

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// poolBridge is a bridge of cluster jftest over a recorded queue of jobs
// in partitions b, "b,a", all (every node) and nodeless, and sinfo's
// partitions a (gpu0-1), b (gpu2), all (gpu0-3) and nodeless (none).
func poolBridge(t *testing.T, jf API) (*Bridge, *recorded) {
	t.Helper()
	run := &recorded{files: map[string]string{
		"squeue " + strings.Join(squeueArgs, " "):                                               "squeue-partitions.txt",
		"sinfo " + strings.Join(sinfoArgs, " "):                                                 "sinfo-partitions.txt",
		"scontrol update JobId=8 Comment=jobfabric: partition nodeless has no node sinfo shows": "",
	}}
	b, err := New(Config{Cluster: "jftest", Slurm: run, API: jf, Mapping: Mapping{DefaultWorkspace: "gpu"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return b, run
}

// TestSyncSetsAPoolPerPartition: a pass sets a pool per partition and one
// for the union a job pending in several partitions needs, deletes the
// cluster's pools nothing needs (never another cluster's), and submits
// each job with its partitions' pool: none for a partition of every node,
// held saying why for a partition without nodes. The same partitions
// again write nothing; a partition change sets the pools it changed.
func TestSyncSetsAPoolPerPartition(t *testing.T) {
	jf := &refusing{tenants: map[string]bool{"acme": true}, pools: map[string][]string{
		"slurm:jftest:gone": {"gpu9"}, "slurm:other:b": {"x1"}, "slurm:jftest:a": {"gpu0", "gpu1"}}}
	b, run := poolBridge(t, jf)
	if _, err := b.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"set slurm:jftest:a:b gpu0,gpu1,gpu2", "set slurm:jftest:all gpu0,gpu1,gpu2,gpu3", "set slurm:jftest:b gpu2", "delete slurm:jftest:gone"}
	if !slices.Equal(jf.poolCalls, want) {
		t.Errorf("pool writes %q, want %q (slurm:jftest:a was already right)", jf.poolCalls, want)
	}
	if _, ok := jf.pools["slurm:other:b"]; !ok {
		t.Error("the bridge deleted another cluster's pool")
	}
	got := map[string]string{}
	for _, s := range jf.submitted {
		got[s.ExternalID] = s.Pool
	}
	wantPools := map[string]string{"slurm:jftest:5": "slurm:jftest:b", "slurm:jftest:6": "slurm:jftest:a:b", "slurm:jftest:7": ""}
	if fmt.Sprint(got) != fmt.Sprint(wantPools) {
		t.Errorf("submitted with pools %v, want %v", got, wantPools)
	}
	if n := run.count("scontrol update JobId=8 Comment=jobfabric: partition nodeless has no node"); n != 1 {
		t.Errorf("the job of a partition without nodes: %d comments, want 1 (held, saying why): %q", n, run.calls)
	}

	jf.poolCalls = nil
	if _, err := b.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(jf.poolCalls) != 0 {
		t.Errorf("a pass over the same partitions wrote %q", jf.poolCalls)
	}
	// b moves to gpu3: its pool and the union follow.
	run.files["sinfo "+strings.Join(sinfoArgs, " ")] = "sinfo-partitions-moved.txt"
	if _, err := b.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	want = []string{"set slurm:jftest:a:b gpu0,gpu1,gpu3", "set slurm:jftest:b gpu3"}
	if !slices.Equal(jf.poolCalls, want) {
		t.Errorf("after b moved: pool writes %q, want %q", jf.poolCalls, want)
	}
}

// TestSyncWithoutPoolsBelowRules5: a jobfabric that refuses pools (a
// member below apply rules 5) gets every job without a pool, as before.
func TestSyncWithoutPoolsBelowRules5(t *testing.T) {
	jf := &refusing{tenants: map[string]bool{"acme": true}, oldRules: true}
	b, _ := poolBridge(t, jf)
	if _, err := b.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(jf.submitted) != 4 {
		t.Fatalf("submitted %d jobs, want 4 (the nodeless partition's too, as before pools)", len(jf.submitted))
	}
	for _, s := range jf.submitted {
		if s.Pool != "" {
			t.Errorf("job %s submitted with pool %s to a cluster without pools", s.ExternalID, s.Pool)
		}
	}
	if !strings.HasPrefix(jf.submitted[0].ExternalID, "slurm:jftest:") {
		t.Errorf("submitted %+v", jf.submitted[0])
	}
}

// TestSyncFollowsAJobMovedToAnotherPartition: jobs of partition a that a
// user moved to b (squeue shows b): job 10, Pending in jobfabric, is moved
// to b's pool (job.pool, no requeue); job 9, released onto gpu0 of a and
// still pending in Slurm, is held again, handed back (rejected) and moved
// to b's pool. Below apply rules 6 (the move refused) the pending one
// stays where it is, and nothing else happens to it.
func TestSyncFollowsAJobMovedToAnotherPartition(t *testing.T) {
	job := func(id uint64, ext string, state domain.JobState, on ...string) domain.Job {
		j := domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: "acme", Workspace: "gpu", GPUs: 8, ExternalID: ext, Pool: "slurm:jftest:a"}, State: state, SubmittedBy: "runtime:bridge"}
		for _, s := range on {
			j.Placement = append(j.Placement, domain.Placement{Server: s, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
		}
		return j
	}
	jf := &refusing{tenants: map[string]bool{"acme": true}, pools: map[string][]string{"slurm:jftest:a": {"gpu0", "gpu1"}, "slurm:jftest:b": {"gpu2"}},
		live: []domain.Job{job(9, "slurm:jftest:5", domain.JobReady, "gpu0"), job(10, "slurm:jftest:6", domain.JobPending)}}
	b, run := poolBridge(t, jf)
	run.files["squeue "+strings.Join(squeueArgs, " ")] = "squeue-moved.txt"
	run.files["scontrol hold 5"] = ""
	st, err := b.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(jf.poolCalls, "; "); !strings.Contains(got, "job 10 slurm:jftest:b") || !strings.Contains(got, "job 9 slurm:jftest:b") {
		t.Errorf("pool calls %q: want jobs 9 and 10 moved to b's pool", got)
	}
	if st.Moved != 2 || st.Rejected != 1 || run.count("scontrol hold 5") != 1 || fmt.Sprint(jf.reports) != "[9 rejected]" || !strings.Contains(jf.messages[0], "moved to partition b: placed on gpu0") {
		t.Errorf("stats %+v, reports %v %q, commands %q: want job 9 held, handed back naming its node, both moved", st, jf.reports, jf.messages, run.calls)
	}
	if run.count("scontrol update JobId=5 ReqNodeList") != 0 || run.count("scontrol release") != 0 {
		t.Errorf("a job moved off its placement's partition was released: %q", run.calls)
	}

	// Below rules 6 the move is refused: the job stays in a's pool.
	old := &rulesFive{refusing: &refusing{tenants: map[string]bool{"acme": true}, pools: jf.pools, live: []domain.Job{job(10, "slurm:jftest:6", domain.JobPending)}}}
	b, run = poolBridge(t, old)
	run.files["squeue "+strings.Join(squeueArgs, " ")] = "squeue-moved.txt"
	if st, err := b.Sync(t.Context()); err != nil || st.Moved != 0 || len(old.submitted) != 0 || len(old.cancelled) != 0 {
		t.Errorf("below rules 6: %+v, %v, submitted %v, cancelled %v: want the job left as it is", st, err, old.submitted, old.cancelled)
	}
}

// rulesFive refuses job.pool as a cluster below apply rules 6 does.
type rulesFive struct{ *refusing }

func (r *rulesFive) SetJobPool(context.Context, uint64, string) (*domain.Job, error) {
	return nil, domain.Errorf(domain.CodeFailedPrecondition, "the cluster applies rules 5: moving a job to another pool needs 6")
}
