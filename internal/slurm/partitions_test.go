package slurm_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/slurm"
	"github.com/jobfabric/jobfabric/internal/slurm/slurmtest"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/topology/export"
)

// TestBridgeKeepsJobsInTheirPartition runs the bridge over Debian's
// slurmctld with two partitions, a (the default: the first two nodes) and
// b (the last two). Three one-node jobs of partition b: jobfabric places
// two, on b's nodes only, and Slurm starts them there; the third waits
// (b is full) though a's nodes are free. Without pools jobfabric placed
// the three on any free servers, so at least one on a node of a, where
// slurmctld refuses to start it. A partition change (b gains a node of
// a) moves the waiting job: it is placed and started on the node b
// gained.
func TestBridgeKeepsJobsInTheirPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, sc, br, a, b := twoPartitions(t, ctx)
	var ids []string
	for range 3 {
		out, err := sc.Command(ctx, "sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", "true", "-A", "acme", "-p", "b", "-N", "1", "--gres=gpu:8")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strings.TrimSpace(string(out)))
	}
	// allocated is where Slurm runs the job ("" while it has no nodes).
	allocated := func(id string) string {
		out, err := sc.Command(ctx, "squeue", "-h", "-j", id, "-o", "%N")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	placed := func(id string) *domain.Job {
		j, err := p.admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, id), "")
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	var total slurm.Stats
	sc.Poll(t, "the bridge did not release the two jobs partition b has room for", func() (bool, string) {
		st, err := br.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total.Released += st.Released
		return total.Released >= 2, fmt.Sprintf("%+v", total)
	})
	var on []string
	for _, id := range ids {
		j := placed(id)
		if len(j.Placement) == 0 {
			continue
		}
		srv := j.Placement[0].Server
		if !slices.Contains(b, srv) {
			t.Errorf("slurm job %s (partition b) placed on %s, a node of partition a; b is %v", id, srv, b)
		}
		if j.Pool != "slurm:"+sc.Name+":b" {
			t.Errorf("slurm job %s submitted with pool %q", id, j.Pool)
		}
		on = append(on, srv)
	}
	if len(on) != 2 {
		t.Fatalf("%d of the 3 jobs of partition b placed, want 2 (b has 2 nodes): on %v", len(on), on)
	}
	for _, id := range ids {
		if j := placed(id); len(j.Placement) > 0 {
			srv := j.Placement[0].Server
			sc.Poll(t, "slurm job "+id+" was not allocated on its placement", func() (bool, string) {
				got := allocated(id)
				return got == srv, got
			})
		}
	}
	var waiting string
	for _, id := range ids {
		if j := placed(id); j.State == domain.JobPending {
			waiting = id
		}
	}
	if waiting == "" {
		t.Fatal("no job of partition b waits")
	}

	// b gains a's first node: the waiting job follows the partition.
	if _, err := sc.Command(ctx, "scontrol", "update", "PartitionName=b", "Nodes="+export.Hostlist(append([]string{a[0]}, b...))); err != nil {
		t.Fatal(err)
	}
	sc.Poll(t, "the waiting job did not move to the node partition b gained", func() (bool, string) {
		if _, err := br.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		got := allocated(waiting)
		return got == a[0], fmt.Sprintf("allocated %q, jobfabric %s", got, placed(waiting).State)
	})
}

// TestBridgeSeesHiddenPartitions: a partition configured Hidden=YES is
// left out of sinfo and its jobs out of squeue for any user but root and
// SlurmUser, unless asked with -a. The bridge runs as such a user here
// (nobody, on jobs nobody submitted: a user may update and release its
// own held jobs): the held job of the hidden partition is submitted with
// that partition's pool, placed on one of its nodes and started there.
// Without -a the bridge never saw the job (squeue showed the queue
// empty) and, with it, would have kept it held ("partition hidden has
// no node sinfo shows").
func TestBridgeSeesHiddenPartitions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range topo.Servers() {
		names = append(names, s.Name)
	}
	open, hidden := names[:2], names[2:]
	parts := fmt.Sprintf("PartitionName=a Nodes=%s Default=YES State=UP MaxTime=INFINITE\nPartitionName=hidden Nodes=%s Hidden=YES State=UP MaxTime=INFINITE",
		export.Hostlist(open), export.Hostlist(hidden))
	p := startPairWith(t, ctx, 1, 4, "training", 32, slurmtest.Options{Partitions: parts, OpenToUsers: true}, nil)
	user := p.sc.As(65534, 65534) // nobody
	if out, err := user.Command(ctx, "sinfo", "-h", "-o", "%R"); err != nil || strings.Contains(string(out), "hidden") {
		t.Fatalf("sinfo without -a as nobody: %q, %v; want the hidden partition left out (the case this test is about)", out, err)
	}
	out, err := user.Command(ctx, "sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", "true", "-A", "acme", "-p", "hidden", "-N", "1", "--gres=gpu:8")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(out))
	br, err := slurm.New(slurm.Config{Cluster: p.sc.Name, Slurm: user, API: p.runtime, PageSize: 1, Mapping: slurm.Mapping{DefaultWorkspace: "training"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	p.sc.Poll(t, "the job of the hidden partition was not released", func() (bool, string) {
		st, err := br.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := p.sc.Command(ctx, "squeue", "-h", "-a", "-t", "all", "-j", id, "-o", "%T|%r|%N|%k")
		return st.Released == 1, fmt.Sprintf("%+v; slurm: %s", st, out)
	})
	j, err := p.admin.JobByExternalID(ctx, slurm.ExternalID(p.sc.Name, id), "")
	if err != nil {
		t.Fatal(err)
	}
	if j.Pool != "slurm:"+p.sc.Name+":hidden" || len(j.Placement) == 0 || !slices.Contains(hidden, j.Placement[0].Server) {
		t.Fatalf("job %d: pool %q, placement %v; want pool slurm:%s:hidden on one of %v", j.ID, j.Pool, j.Placement, p.sc.Name, hidden)
	}
	p.sc.Poll(t, "slurm did not allocate the job on its placement", func() (bool, string) {
		out, _ := p.sc.Command(ctx, "squeue", "-h", "-a", "-j", id, "-o", "%N")
		got := strings.TrimSpace(string(out))
		return got == j.Placement[0].Server, got
	})
}

// TestBridgeFollowsAJobMovedToAnotherPartition: partitions a (the first
// two nodes) and b (the last two). Two jobs of a fill it; a third of a
// waits in jobfabric. Its user moves it to b (scontrol update JobId=N
// Partition=b): the bridge moves the jobfabric job to b's pool, the same
// job (its id, no requeue), and it is placed, released and started on a
// node of b. Then a job of a is placed (Ready, still held) and moved to b
// before the bridge releases it: placed outside b, it is handed back
// (one requeue), moved to b's pool and started on b's last free node.
// Before, both kept pool a: the first waited forever for a's nodes, the
// second was released onto a node of a, which slurmctld does not start a
// job of b on.
func TestBridgeFollowsAJobMovedToAnotherPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, sc, br, a, b := twoPartitions(t, ctx)
	var total slurm.Stats
	pass := func() {
		t.Helper()
		st, err := br.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total.Released += st.Released
		total.Moved += st.Moved
		total.Rejected += st.Rejected
	}
	sbatch := func() string {
		t.Helper()
		out, err := sc.Command(ctx, "sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", "true", "-A", "acme", "-p", "a", "-N", "1", "--gres=gpu:8")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	allocated := func(id string) string {
		out, _ := sc.Command(ctx, "squeue", "-h", "-j", id, "-o", "%N")
		return strings.TrimSpace(string(out))
	}
	jobOf := func(id string) *domain.Job {
		t.Helper()
		j, err := p.admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, id), "")
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	first := sbatch()
	sbatch()
	waiting := sbatch()
	p.sc.Poll(t, "the two jobs of a were not released", func() (bool, string) {
		pass()
		return total.Released == 2, fmt.Sprintf("%+v", total)
	})
	before := jobOf(waiting)
	if before.State != domain.JobPending || before.Pool != "slurm:"+sc.Name+":a" {
		t.Fatalf("the third job of a is %s in pool %q: want Pending in a's pool (a is full)", before.State, before.Pool)
	}

	// Moved while pending in jobfabric: the same job, in b's pool.
	if _, err := sc.Command(ctx, "scontrol", "update", "JobId="+waiting, "Partition=b"); err != nil {
		t.Fatal(err)
	}
	sc.Poll(t, "the job moved to b did not start on a node of b", func() (bool, string) {
		pass()
		got := allocated(waiting)
		return slices.Contains(b, got), fmt.Sprintf("allocated %q; jobfabric %s pool %q; %+v", got, jobOf(waiting).State, jobOf(waiting).Pool, total)
	})
	if j := jobOf(waiting); j.ID != before.ID || j.Requeues != 0 || j.Pool != "slurm:"+sc.Name+":b" || slurm.PlacedNodes(j)[0] != allocated(waiting) {
		t.Errorf("the moved job is %d (was %d), requeues %d, pool %q, placed %v: want the same job, not requeued, in b's pool, where it runs",
			j.ID, before.ID, j.Requeues, j.Pool, slurm.PlacedNodes(j))
	}

	// Moved while Ready and held, placed on a node of a.
	if _, err := sc.Command(ctx, "scancel", first); err != nil {
		t.Fatal(err)
	}
	late := sbatch()
	sc.Poll(t, "the new job of a was not placed", func() (bool, string) {
		pass()
		j, err := p.admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, late), "")
		if err != nil {
			return false, err.Error()
		}
		return j.State == domain.JobReady, string(j.State)
	})
	ready := jobOf(late)
	if on := slurm.PlacedNodes(ready)[0]; !slices.Contains(a, on) || allocated(late) != "" {
		t.Fatalf("the new job of a is placed on %s and allocated %q: want placed on a node of a, held", on, allocated(late))
	}
	if _, err := sc.Command(ctx, "scontrol", "update", "JobId="+late, "Partition=b"); err != nil {
		t.Fatal(err)
	}
	sc.Poll(t, "the Ready job moved to b did not start on b's free node", func() (bool, string) {
		pass()
		got := allocated(late)
		return slices.Contains(b, got), fmt.Sprintf("allocated %q; jobfabric %s on %v pool %q; %+v", got, jobOf(late).State, slurm.PlacedNodes(jobOf(late)), jobOf(late).Pool, total)
	})
	if j := jobOf(late); j.ID != ready.ID || j.Requeues != 1 || j.Pool != "slurm:"+sc.Name+":b" || total.Rejected != 1 || total.Moved != 2 {
		t.Errorf("the Ready job moved is %d (was %d), requeues %d, pool %q; stats %+v: want the same job handed back once and moved to b's pool",
			j.ID, ready.ID, j.Requeues, j.Pool, total)
	}
}

// twoPartitions starts slurmctld with partitions a (the first two of four
// servers, the default) and b (the other two), a jobfabric server, and a
// bridge reading jobfabric's jobs a page of one at a time.
func twoPartitions(t *testing.T, ctx context.Context) (pair, *slurmtest.Cluster, *slurm.Bridge, []string, []string) {
	t.Helper()
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range topo.Servers() {
		names = append(names, s.Name)
	}
	a, b := names[:2], names[2:]
	parts := fmt.Sprintf("PartitionName=a Nodes=%s Default=YES State=UP MaxTime=INFINITE\nPartitionName=b Nodes=%s State=UP MaxTime=INFINITE",
		export.Hostlist(a), export.Hostlist(b))
	p := startPairWith(t, ctx, 1, 4, "training", 32, slurmtest.Options{Partitions: parts}, nil)
	br, err := slurm.New(slurm.Config{Cluster: p.sc.Name, Slurm: p.sc, API: p.runtime, PageSize: 1, Mapping: slurm.Mapping{DefaultWorkspace: "training"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return p, p.sc, br, a, b
}
