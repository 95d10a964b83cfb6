package state

import (
	"fmt"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// CmdJobPool moves a job that has not started to another server pool (a
// workload runtime's: the Slurm bridge, when a user moves a held job to
// another partition).
const CmdJobPool CommandType = "job.pool"

// JobPool sets job ID's pool; "" lets it use any server. The job must not
// have started (Pending, Placed or Ready), and a job already placed keeps
// its placement only if every server of it is in the new pool: otherwise
// the change is refused, and the runtime hands the job back first (a
// rejected report requeues it).
type JobPool struct {
	ID   uint64 `json:"id"`
	Pool string `json:"pool,omitempty"`
}

func (f *FSM) applyJobPool(c *Command) (any, *domain.Error) {
	p, derr := decode[JobPool](c)
	if derr != nil {
		return nil, derr
	}
	if c.rules() < RulesJobPool {
		// The leader's check: a member that does not know the command
		// would stop at it. (No entry below RulesJobPool has this type.)
		return nil, domain.Errorf(domain.CodeFailedPrecondition, "the cluster applies rules %d: moving a job to another pool needs %d, once every member runs a binary with it (jobfabric cluster status)", c.rules(), RulesJobPool)
	}
	j, ok := f.d.Jobs[p.ID]
	if !ok {
		return nil, domain.NotFound("job", fmt.Sprint(p.ID))
	}
	switch j.State {
	case domain.JobPending, domain.JobPlaced, domain.JobReady:
	default:
		return nil, domain.Errorf(domain.CodeFailedPrecondition, "job %d is %s: only a job that has not started (Pending, Placed, Ready) moves to another pool", j.ID, j.State)
	}
	if p.Pool != "" {
		if err := domain.ValidatePoolName("pool", p.Pool); err != nil {
			return nil, err
		}
		if err := f.checkPool(&domain.JobSpec{Pool: p.Pool}, c.rules()); err != nil {
			return nil, err
		}
		// Placed already: only where the new pool allows.
		servers := f.d.Pools[p.Pool].Servers
		for _, pl := range j.Placement {
			if _, in := slices.BinarySearch(servers, pl.Server); !in {
				return nil, domain.Errorf(domain.CodeFailedPrecondition, "job %d is %s on server %s, which is not in pool %s: hand it back first (report it rejected)", j.ID, j.State, pl.Server, p.Pool)
			}
		}
	}
	if j.Pool == p.Pool {
		return CopyJob(j), nil
	}
	if c.check {
		return nil, nil
	}
	from := j.Pool
	j.Pool = p.Pool
	j.UpdatedAt = c.At
	f.jobs.touch(j)
	f.event(c, "job.pool", fmt.Sprintf("job/%d", j.ID), j.Tenant, j.Workspace, fmt.Sprintf("pool %s -> %s", orAny(from), orAny(p.Pool)))
	return CopyJob(j), nil
}

func orAny(pool string) string {
	if pool == "" {
		return "(any)"
	}
	return pool
}
