package slurm

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
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
