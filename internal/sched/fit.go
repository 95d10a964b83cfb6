package sched

import (
	"fmt"
	"slices"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
)

// ReasonPlanMismatch: a placement does not match its job's request (GPU
// count, share, MIG profile, shape); only a stale or corrupt plan has one.
const ReasonPlanMismatch = "plan_mismatch"

// Fit answers whether placements still fit a state, by the rules Schedule
// places by: node conditions, sites and drivers, workspace and tenant
// quotas (guaranteed, borrow, lend, model quotas), the models a job
// accepts, isolation, free GPUs, shares and MIG geometry, CPU and memory,
// and required topology. The state machine's plan applier checks every
// placement of a plan with it against the state it commits to, as Nomad's
// plan applier calls the scheduler's structs.AllocsFit: one copy of the
// rules, so a change landing between the scheduler's snapshot and the
// commit (a cordon, a lowered quota, another plan) refuses what no longer
// fits.
//
// Fit is the cluster view Placer uses, with the usage Schedule admits by;
// Place commits what fits, so a plan's placements are checked in order.
type Fit struct {
	s   *Snapshot
	c   *cluster
	u   *usage
	now time.Time
}

// NewFit builds the view of s at now (the command's time, never a clock).
func NewFit(s *Snapshot, now time.Time) *Fit {
	c := buildCluster(s)
	return &Fit{s: s, c: c, u: buildUsage(s, c), now: now}
}

// Place checks that j may take pl now and, if so, commits it to the view.
// A refusal leaves the view unchanged and says why.
func (f *Fit) Place(j *domain.Job, pl []domain.Placement) (domain.Reason, bool) {
	ref := j.Tenant + "/" + j.Workspace
	w, t := f.s.Workspaces[ref], f.s.Tenants[j.Tenant]
	if w == nil || t == nil {
		return domain.Reason{Code: ReasonUnknown, Message: fmt.Sprintf("workspace %s no longer exists", ref)}, false
	}
	if j.BorrowNotBefore != nil && f.now.Before(*j.BorrowNotBefore) && f.u.usedOf(ref)+demand(j) > w.Guaranteed*unit {
		return domain.Reason{Code: ReasonBackoff, Message: fmt.Sprintf(
			"reclaimed recently: it may run within the workspace's guarantee, but may not borrow again before %s", j.BorrowNotBefore.UTC().Format(time.RFC3339))}, false
	}
	models, r, ok := admit(j, w, f.s, f.u, f.c)
	if !ok {
		return r, false
	}
	model, r, ok := f.fits(j, t, pl)
	if !ok {
		return r, false
	}
	if models != nil && demand(j) > 0 && !slices.Contains(models, model) {
		return domain.Reason{Code: ReasonWorkspaceQuota, Message: fmt.Sprintf(
			"the plan puts it on %s GPUs; its quotas and request allow %v now", model, models)}, false
	}
	if ms := j.Models(); len(ms) > 0 && demand(j) > 0 && !slices.Contains(ms, model) {
		return mismatch("the plan puts it on %s GPUs; the job accepts %v", model, ms), false
	}
	f.c.commit(j, t, pl)
	f.u.addJob(j, pl, 1)
	return domain.Reason{}, true
}

// Used is what workspace ref ("tenant/name") holds in the view, in units:
// after Place, the placed job included.
func (f *Fit) Used(ref string) int { return f.u.usedOf(ref) }

// Release gives back what j holds (j.Placement): a release or a stop
// committed earlier in the same plan.
func (f *Fit) Release(j *domain.Job) {
	f.c.release(j)
	f.u.addJob(j, j.Placement, -1)
}

func mismatch(format string, args ...any) domain.Reason {
	return domain.Reason{Code: ReasonPlanMismatch, Message: fmt.Sprintf(format, args...)}
}

func busy(format string, args ...any) domain.Reason {
	return domain.Reason{Code: ReasonCapacity, Message: fmt.Sprintf(format, args...)}
}

// fits checks the placements themselves against the servers: each server
// eligible for the job, its GPUs, slices or share free, the request met
// exactly, one GPU model, and the required topology. It returns the model.
func (f *Fit) fits(j *domain.Job, t *domain.Tenant, pl []domain.Placement) (string, domain.Reason, bool) {
	if len(pl) == 0 {
		return "", mismatch("the plan gives no placement"), false
	}
	model, n := "", 0
	servers := make([]*server, 0, len(pl))
	for i, p := range pl {
		v := f.c.server(p.Server)
		if v == nil {
			return "", busy("server %q is not in the inventory", p.Server), false
		}
		if slices.Contains(servers, v) {
			return "", mismatch("the plan names server %s twice", p.Server), false
		}
		servers = append(servers, v)
		if i > 0 && v.model != model {
			return "", mismatch("the plan spans GPU models %s and %s; a job runs on one", model, v.model), false
		}
		model = v.model
		if !f.c.eligible(v, j, t) {
			return "", busy("%s", f.ineligible(v, j, t)), false
		}
		if !v.fitsHost(j) {
			return "", busy("server %s has not %d milli-CPU and %d MiB of memory free", v.s.Name, j.CPUMilli, j.MemoryMiB), false
		}
		var r domain.Reason
		var ok bool
		switch {
		case j.Share > 0:
			r, ok = f.fitsShare(j, v, p, len(pl))
		case j.MIGProfile != "":
			r, ok = f.fitsMIG(j, v, p, len(pl))
		case j.CPUOnly():
			r, ok = domain.Reason{}, len(pl) == 1 && len(p.GPUs) == 0 && p.Share == 0 && len(p.MIG) == 0
			if !ok {
				r = mismatch("a CPU-only job is placed on one server without GPUs")
			}
		default:
			r, ok = f.fitsWhole(j, v, p, pl[0])
			n += len(p.GPUs)
		}
		if !ok {
			return "", r, false
		}
	}
	if j.MIGProfile == "" && j.Share == 0 && !j.CPUOnly() {
		if n != j.GPUs {
			return "", mismatch("job asks for %d GPUs, the plan gives %d", j.GPUs, n), false
		}
		if rank := spanRank(servers); rank > 3 {
			return "", mismatch("the plan spans fabrics; a gang runs within one"), false
		} else if req := j.Topology; req != nil && req.Required && rank > maxRank(req.Level) {
			return "", domain.Reason{Code: ReasonTopology, Message: fmt.Sprintf("requires one %s; the plan spans a %s", req.Level, levelName(rank))}, false
		}
	}
	return model, domain.Reason{}, true
}

// fitsWhole: whole GPUs, free, the same indexes on every server of a gang
// (GPU i of each talks on rail i), gpusPerNode on each when set.
func (f *Fit) fitsWhole(j *domain.Job, v *server, p, first domain.Placement) (domain.Reason, bool) {
	if p.Share > 0 || len(p.MIG) > 0 || len(p.GPUs) == 0 {
		return mismatch("job asks for whole GPUs; the plan gives %s", placementDesc(p)), false
	}
	if j.GPUsPerNode > 0 && len(p.GPUs) != j.GPUsPerNode {
		return mismatch("job asks for %d GPUs per node; the plan gives %d on %s", j.GPUsPerNode, len(p.GPUs), p.Server), false
	}
	if !slices.Equal(p.GPUs, first.GPUs) {
		return mismatch("a gang uses the same GPU indexes on every server; the plan gives %v on %s and %v on %s", first.GPUs, first.Server, p.GPUs, p.Server), false
	}
	for i, g := range p.GPUs {
		if g < 0 || g >= len(v.free) || slices.Contains(p.GPUs[:i], g) {
			return mismatch("server %s has no GPU %d (or the plan names it twice)", p.Server, g), false
		}
		if !v.free[g] {
			return busy("GPU %d of %s is in use", g, p.Server), false
		}
	}
	return domain.Reason{}, true
}

// fitsShare: one GPU, free or time-sliced by the job's own tenant only, with
// room for the share and no MIG instances.
func (f *Fit) fitsShare(j *domain.Job, v *server, p domain.Placement, n int) (domain.Reason, bool) {
	if n != 1 || len(p.GPUs) != 1 || p.Share != j.Share || len(p.MIG) > 0 {
		return mismatch("a share of %g is placed as that fraction of one GPU; the plan gives %s", j.Share, placementDesc(p)), false
	}
	g := p.GPUs[0]
	switch {
	case g < 0 || g >= len(v.free):
		return mismatch("server %s has no GPU %d", p.Server, g), false
	case len(v.mig[g]) > 0:
		return busy("GPU %d of %s runs MIG instances", g, p.Server), false
	case v.share[g] > 0 && v.shareTenant[g] != j.Tenant:
		return busy("GPU %d of %s is time-sliced by another tenant", g, p.Server), false
	case !v.free[g] && v.share[g] == 0:
		return busy("GPU %d of %s is in use", g, p.Server), false
	case v.share[g]+domain.ShareUnits(j.Share) > unit:
		return busy("GPU %d of %s has no %g left to share", g, p.Server, j.Share), false
	}
	return domain.Reason{}, true
}

// fitsMIG: MIGCount instances of the job's profile on one server, each GPU
// free or already in MIG mode, every GPU's layout within its geometry.
func (f *Fit) fitsMIG(j *domain.Job, v *server, p domain.Placement, n int) (domain.Reason, bool) {
	if n != 1 || p.Share > 0 || len(p.MIG) != j.MIGCount {
		return mismatch("job asks for %d x %s on one server; the plan gives %s", j.MIGCount, j.MIGProfile, placementDesc(p)), false
	}
	if _, ok := mig.Units(v.model, j.MIGProfile); !ok {
		return mismatch("%s GPUs of %s have no MIG profile %s", v.model, p.Server, j.MIGProfile), false
	}
	for i, g := range p.GPUs {
		if g < 0 || g >= len(v.free) || slices.Contains(p.GPUs[:i], g) {
			return mismatch("server %s has no GPU %d (or the plan names it twice)", p.Server, g), false
		}
		if !v.free[g] && len(v.mig[g]) == 0 {
			return busy("GPU %d of %s is in use whole or time-sliced", g, p.Server), false
		}
		layout := slices.Clone(v.mig[g])
		for _, sl := range p.MIG {
			if sl.GPU == g {
				layout = append(layout, mig.Instance{Profile: sl.Profile, Start: sl.Start})
			}
		}
		if len(layout) == len(v.mig[g]) {
			return mismatch("the plan names GPU %d of %s but puts no instance on it", g, p.Server), false
		}
		if err := mig.Validate(mig.Layout{Model: v.model, Instances: layout}); err != nil {
			return busy("GPU %d of %s cannot hold that MIG layout: %v", g, p.Server, err), false
		}
	}
	for _, sl := range p.MIG {
		if sl.Profile != j.MIGProfile || !slices.Contains(p.GPUs, sl.GPU) {
			return mismatch("the plan gives MIG %s on GPU %d of %s; the job asks for %s on the GPUs it names", sl.Profile, sl.GPU, p.Server, j.MIGProfile), false
		}
	}
	return domain.Reason{}, true
}

// ineligible says why eligible refused v for j.
func (f *Fit) ineligible(v *server, j *domain.Job, t *domain.Tenant) string {
	switch cond, ok := f.c.nodes[v.s.Name]; {
	case ok && !cond.Schedulable():
		return fmt.Sprintf("server %s is %s", v.s.Name, condition(cond))
	case j.GPUModel != "" && v.model != j.GPUModel:
		return fmt.Sprintf("server %s has %s GPUs; the job asks for %s", v.s.Name, v.model, j.GPUModel)
	case j.Pool != "" && f.c.statics.pool(f.c, j.Pool) == nil:
		return fmt.Sprintf("the job's pool %s does not exist", j.Pool)
	case j.Pool != "" && !f.c.statics.pool(f.c, j.Pool)[v.idx]:
		return fmt.Sprintf("server %s is not in the job's pool %s", v.s.Name, j.Pool)
	case !v.staticEligible(j, t, f.c.nodes, f.c.statics.pool(f.c, j.Pool)):
		return fmt.Sprintf("server %s is outside the tenant's sites or lacks the driver the job needs", v.s.Name)
	case v.exclusive != "" && v.exclusive != j.Tenant:
		return fmt.Sprintf("server %s belongs to a server-isolated tenant", v.s.Name)
	}
	return fmt.Sprintf("server %s holds another tenant's GPUs and tenant %s is server-isolated", v.s.Name, j.Tenant)
}

func condition(c domain.NodeCondition) string {
	switch {
	case c.Cordoned:
		return "cordoned"
	case c.Draining:
		return "draining"
	}
	return "unhealthy"
}

// spanRank is the packing rank of a gang's servers: 0 one server, 1 one
// NVLink domain, 2 one stripe, 3 one fabric, 4 more.
func spanRank(vs []*server) int {
	if len(vs) <= 1 {
		return 0
	}
	same := func(key func(*server) int) bool {
		for _, v := range vs[1:] {
			if key(v) != key(vs[0]) {
				return false
			}
		}
		return true
	}
	switch {
	case same(func(v *server) int { return v.domainID }):
		return 1
	case same(func(v *server) int { return v.stripeID }):
		return 2
	case same(func(v *server) int { return v.fabricID }):
		return 3
	}
	return 4
}

func levelName(rank int) string {
	if rank < 4 {
		return []string{LevelServer, LevelNVLinkDomain, LevelStripe, LevelFabric}[rank]
	}
	return "several fabrics"
}

func placementDesc(p domain.Placement) string {
	switch {
	case p.Share > 0:
		return fmt.Sprintf("a %g share of GPU %v on %s", p.Share, p.GPUs, p.Server)
	case len(p.MIG) > 0:
		return fmt.Sprintf("%d MIG instances on GPUs %v of %s", len(p.MIG), p.GPUs, p.Server)
	}
	return fmt.Sprintf("GPUs %v of %s", p.GPUs, p.Server)
}
