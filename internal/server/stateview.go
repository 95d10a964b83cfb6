package server

import (
	"iter"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/pool"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/state"
)

// The builders that turn the replicated state into another package's
// input, reading it through state.View (one read lock each): the state
// machine keeps only what its apply needs, and does not link the binder
// or the renderers.

// schedSnapshot is the scheduler's view of the state: the live jobs, the
// placed jobs ended since (fair-share history), copied.
func schedSnapshot(fsm *state.FSM, since time.Time) (s *sched.Snapshot) {
	fsm.Read(func(v state.View) { s = sched.SnapshotOf(v, since, state.CopyJob) })
	return s
}

// cycleSnapshot is schedSnapshot for the scheduling loop: the jobs
// unchanged since its previous cycle are shared from that cycle's
// snapshot, so the state's read lock, which every apply waits for, is held
// for a copy of each job changed since, and the merge with the others (a
// walk of every live job) runs after it is released.
func (s *Server) cycleSnapshot(since time.Time) *sched.Snapshot {
	var finish func() *sched.Snapshot
	s.fsm.Read(func(v state.View) { finish = s.snaps.Begin(v, since) })
	return finish()
}

// drySnapshot is the scheduler's snapshot a dry run needs: the jobs
// holding GPUs, not the pending ones (a dry run places its job as if it
// were the only one pending), so a tenant's dry run holds the read lock
// for a copy of the placed jobs, not of every live job.
func drySnapshot(fsm *state.FSM, since time.Time) (s *sched.Snapshot) {
	fsm.Read(func(v state.View) { s = sched.SnapshotOf(placedView{v}, since, state.CopyJob) })
	return s
}

// placedView is a View whose live jobs are those with a placement.
type placedView struct{ state.View }

func (v placedView) LiveJobs() iter.Seq[*domain.Job] { return v.HoldingJobs() }

// bindingInput gathers what the binder needs for a job on a node: the
// job, the node as declared and as reported, the other jobs holding GPUs
// there, and the job's fabric identity (the ids the pools gave its tenant
// and its job group).
func bindingInput(fsm *state.FSM, jobID uint64, node string) (in binding.Input, derr *domain.Error) {
	fsm.Read(func(v state.View) { in, derr = bindingInputOf(v, jobID, node) })
	return in, derr
}

func bindingInputOf(v state.View, jobID uint64, node string) (binding.Input, *domain.Error) {
	j, ok := v.Job(jobID)
	if !ok {
		return binding.Input{}, domain.NotFound("job", strconv.FormatUint(jobID, 10))
	}
	srv, ok := v.Server(node)
	if !ok {
		return binding.Input{}, domain.NotFound("server", node)
	}
	in := binding.Input{Job: state.CopyJob(j), Node: node, Server: copyServer(srv)}
	if fab := fabricOf(v.Topology(), node); fab != nil {
		in.RailOptimized = fab.RailOptimized
	}
	if r, ok := v.Host(node); ok {
		in.Host = state.CopyHost(r)
	}
	for o := range v.LiveJobsOn(node) { // the jobs holding GPUs there, not every live job
		if o.ID != j.ID && o.State.HoldsGPUs() && slices.ContainsFunc(o.Placement, func(p domain.Placement) bool { return p.Server == node }) {
			in.Others = append(in.Others, *state.CopyJob(o))
		}
	}
	in.Fabric = binding.Identity{Tenant: j.Tenant, Workspace: j.Workspace}
	if t, ok := v.Tenant(j.Tenant); ok {
		in.Fabric.Isolation = t.Isolation
		if vni, ok := v.PoolID(pool.VNI, "tenant/"+t.Name); ok {
			in.Fabric.L3VNI = vni
		}
		if id, ok := v.PoolID(pool.VRFID, "tenant/"+t.Name); ok {
			in.Fabric.VRF = fabric.VRFName(t.Name, uint16(id))
		}
		if g, ok := v.PoolID(pool.Group, "job/"+strconv.FormatUint(j.ID, 10)); ok {
			in.Fabric.GroupID = uint16(g)
		}
	}
	return in, nil
}

// fabricOf is the fabric a server is cabled into (nil when none).
func fabricOf(t *domain.Topology, server string) *domain.Fabric {
	if t == nil {
		return nil
	}
	for si := range t.Sites {
		for fi := range t.Sites[si].Fabrics {
			fab := &t.Sites[si].Fabrics[fi]
			for _, s := range fab.Servers {
				if s.Name == server {
					return fab
				}
			}
		}
	}
	return nil
}

func copyServer(s *domain.Server) *domain.Server {
	cp := *s
	cp.GPUNUMA = slices.Clone(s.GPUNUMA)
	cp.NICs = slices.Clone(s.NICs)
	return &cp
}

// deviceFiles turns stored configs into the renderer's form, sorted by
// device.
func deviceFiles(cfgs map[string]state.DeviceConfig) []render.DeviceFiles {
	out := make([]render.DeviceFiles, 0, len(cfgs))
	for _, name := range slices.Sorted(maps.Keys(cfgs)) {
		dc := cfgs[name]
		out = append(out, render.DeviceFiles{Device: name, NOS: dc.NOS, Files: renderFiles(dc.Files)})
	}
	return out
}

// storedFiles and renderFiles convert between the renderer's files and
// the state's (the same fields).
func storedFiles(fs []render.File) []state.File {
	out := make([]state.File, len(fs))
	for i, f := range fs {
		out[i] = state.File(f)
	}
	return out
}

func renderFiles(fs []state.File) []render.File {
	out := make([]render.File, len(fs))
	for i, f := range fs {
		out[i] = render.File(f)
	}
	return out
}
