package slurm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Pools: each Slurm partition is a jobfabric server pool
// slurm:CLUSTER:PARTITION of its nodes, and a job pending in several
// partitions (squeue's "a,b") the pool of their union,
// slurm:CLUSTER:a:b. A job is submitted with its partitions' pool, so
// jobfabric places it only where slurmctld can start it; a partition
// holding every node Slurm has needs none (the common single-partition
// cluster writes one pool.set at start and names no pool). The bridge
// sets a pool when its nodes changed since the last pass (a partition
// change moves the pending jobs of it), and deletes the pools of its
// cluster no partition or job needs any more.

// PoolPrefix is the name prefix of a Slurm cluster's pools.
func PoolPrefix(cluster string) string { return "slurm:" + cluster + ":" }

// poolName is the pool of a job's partitions (squeue's %P: "a" or
// "a,b"), each partition once, sorted; "" when the job names none.
func (b *Bridge) poolName(partitions string) string {
	parts := partitionList(partitions)
	if len(parts) == 0 {
		return ""
	}
	return PoolPrefix(b.cfg.Cluster) + strings.Join(parts, ":")
}

func partitionList(partitions string) []string {
	var parts []string
	for _, p := range strings.Split(partitions, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	return parts
}

// poolNodes is the union of the partitions' nodes, sorted; ok false when
// a partition has no node sinfo shows.
func poolNodes(v *nodeView, partitions string) ([]string, bool) {
	var out []string
	for _, p := range partitionList(partitions) {
		ns, ok := v.parts[p]
		if !ok {
			return nil, false
		}
		out = append(out, ns...)
	}
	slices.Sort(out)
	return slices.Compact(out), len(out) > 0
}

// pools is what the bridge knows of its cluster's pools in jobfabric.
type pools struct {
	// set are the servers of each pool of the cluster, as jobfabric has
	// them (read at the first pass, then as set); nil until read.
	set map[string][]string
	// off: jobfabric refused pool.set (a member without pools, apply
	// rules below 5): jobs are submitted without pools, and the next pass
	// tries again.
	off bool
}

// syncPools makes jobfabric's pools of this cluster Slurm's partitions
// (and the unions the live jobs need) as v shows them. It reports whether
// the jobs of this pass may name pools: the pools are in jobfabric.
func (b *Bridge) syncPools(ctx context.Context, v *nodeView, jobs []Job) bool {
	if v == nil {
		// sinfo unread: the pools set before stand; new jobs name them.
		return b.pools.set != nil && !b.pools.off
	}
	prefix := PoolPrefix(b.cfg.Cluster)
	if b.pools.set == nil {
		ps, err := b.cfg.API.Pools(ctx)
		if err != nil {
			b.cfg.Logger.Warn("slurm bridge: read jobfabric's pools; jobs are submitted without one this pass", "err", err)
			return false
		}
		b.pools.set = map[string][]string{}
		for _, p := range ps {
			if strings.HasPrefix(p.Name, prefix) {
				b.pools.set[p.Name] = p.Servers
			}
		}
	}
	want := make(map[string][]string, len(v.parts))
	for part, ns := range v.parts {
		want[prefix+part] = ns
	}
	for i := range jobs {
		if j := &jobs[i]; !j.Ended() && strings.Contains(j.Partition, ",") {
			if ns, ok := poolNodes(v, j.Partition); ok {
				want[b.poolName(j.Partition)] = ns
			}
		}
	}
	b.pools.off = false
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if slices.Equal(b.pools.set[name], want[name]) {
			continue
		}
		if domain.ValidatePoolName("pool", name) != nil {
			continue // a partition name jobfabric cannot take: its jobs stay held (poolOf)
		}
		p, err := b.cfg.API.SetPool(ctx, name, want[name])
		switch {
		case domain.CodeOf(err) == domain.CodeFailedPrecondition:
			b.cfg.Logger.Warn("slurm bridge: jobfabric does not take server pools yet (apply rules below 5: a member runs an older binary); jobs are submitted without their partition's pool", "err", err)
			b.pools.off = true
			return false
		case err != nil:
			b.cfg.Logger.Warn("slurm bridge: set the pool of a partition", "pool", name, "err", err)
			delete(b.pools.set, name) // set again next pass
			continue
		}
		b.pools.set[name] = p.Servers
		b.cfg.Logger.Info("slurm bridge: pool set", "pool", name, "servers", len(p.Servers))
	}
	for _, name := range slices.Sorted(maps.Keys(b.pools.set)) {
		if _, ok := want[name]; ok {
			continue
		}
		if _, err := b.cfg.API.DeletePool(ctx, name); err != nil && domain.CodeOf(err) != domain.CodeNotFound {
			b.cfg.Logger.Warn("slurm bridge: delete the pool of a partition gone", "pool", name, "err", err)
			continue
		}
		delete(b.pools.set, name)
	}
	return true
}

// poolOf is the pool a job is submitted with: "" when pools are off this
// pass or its partitions hold every node Slurm has (any placement will
// do); why, instead, when jobfabric has no pool for them (the job stays
// held, saying so).
func (b *Bridge) poolOf(p *pass, j *Job) (pool, why string) {
	if !p.pools || j.Partition == "" {
		return "", ""
	}
	name := b.poolName(j.Partition)
	if err := domain.ValidatePoolName("pool", name); err != nil {
		return "", "partition " + j.Partition + " cannot name a jobfabric pool: " + err.Message
	}
	if v := p.nodes; v != nil {
		ns, ok := poolNodes(v, j.Partition)
		if !ok {
			return "", "partition " + j.Partition + " has no node sinfo shows"
		}
		if len(ns) == len(v.known) {
			return "", "" // every node Slurm has
		}
	}
	if _, ok := b.pools.set[name]; !ok {
		return "", "jobfabric has no pool " + name + " yet (the bridge sets it from sinfo)"
	}
	return name, ""
}

// repartition keeps a Slurm job that has not started in its partitions'
// pool: a user may move a held (or released, still pending) job to
// another partition (scontrol update JobId=N Partition=b) after the
// bridge submitted it, and slurmctld starts it only on the new
// partition's nodes. The jobfabric job is moved (job.pool: its id and
// queue place kept) while it is Pending, or placed on servers the new
// pool holds; a Ready job placed outside it is held (if released) and
// handed back (rejected), then moved once Pending; a Placed one waits to
// be Ready. It returns the job as jobfabric has it now, and skip: the
// pass leaves the job alone (handed back, or waiting). A running job's
// partition does not change: Slurm refuses it.
func (b *Bridge) repartition(ctx context.Context, p *pass, j *Job, jf *domain.Job) (_ *domain.Job, skip bool, _ error) {
	if !p.pools || j.Partition == "" {
		return jf, false, nil
	}
	switch jf.State {
	case domain.JobPending, domain.JobPlaced, domain.JobReady:
	default:
		return jf, false, nil
	}
	want, why := b.poolOf(p, j)
	if why != "" || want == jf.Pool {
		return jf, false, nil // no pool to move to yet: the next pass sees
	}
	if out := b.outside(jf, want); out != "" {
		if jf.State != domain.JobReady {
			return jf, true, nil // Placed: handed back once Ready
		}
		if !j.Held() {
			if _, err := b.cfg.Slurm.Command(ctx, "scontrol", "hold", j.ID); err != nil {
				return jf, true, fmt.Errorf("hold slurm job %s moved to partition %s: %w", j.ID, j.Partition, err)
			}
		}
		p.reject = append(p.reject, rejection{slurmID: j.ID, job: jf.ID, pool: &want,
			why: clip(fmt.Sprintf("slurm job %s moved to partition %s: placed on %s, which is not in it", j.ID, j.Partition, out), 1024)})
		return jf, true, nil
	}
	moved, err := b.cfg.API.SetJobPool(ctx, jf.ID, want)
	if err != nil {
		if domain.CodeOf(err) == domain.CodeFailedPrecondition {
			// Apply rules below 6, or the job moved on since the list:
			// it stays in its pool this pass.
			b.cfg.Logger.Warn("slurm bridge: move a job to its new partition's pool", "slurm_job", j.ID, "job", jf.ID, "pool", want, "err", err)
			return jf, false, nil
		}
		return jf, false, fmt.Errorf("move job %d to pool %q: %w", jf.ID, want, err)
	}
	p.st.Moved++
	b.cfg.Logger.Info("slurm bridge: job moved to its new partition's pool", "slurm_job", j.ID, "job", jf.ID, "partition", j.Partition, "from", jf.Pool, "pool", want)
	return moved, false, nil
}

// outside is the first server of jf's placement not in pool (as jobfabric
// has it); "" when there is none ("" pool: any server).
func (b *Bridge) outside(jf *domain.Job, pool string) string {
	if pool == "" {
		return ""
	}
	servers := b.pools.set[pool]
	for _, n := range PlacedNodes(jf) {
		if !slices.Contains(servers, n) {
			return n
		}
	}
	return ""
}
