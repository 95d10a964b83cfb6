package sched

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
)

// GPU models. Capacity is counted per model: a gang lands on one model,
// a job may accept several (in order of preference), and a workspace may
// carve its quota per model (domain.ModelQuota). Models matter only where
// the cluster has several or a quota names one; a single-model cluster
// without model quotas takes none of these paths.

// admit checks quota for j (quotaAt) and, per GPU model, the workspace's
// model quota and the capacity of that model others do not protect. It
// returns the models the job may be placed on now (nil: any server), or
// the reason it may not be admitted.
func admit(j *domain.Job, w *domain.Workspace, s *Snapshot, u *usage, c *cluster) ([]string, domain.Reason, bool) {
	return admitAt(j, w, s.Tenants[j.Tenant], u, c, u.ix.at(j.Tenant, j.Workspace, w))
}

// admitAt is admit with j's tenant and the workspace's indices at (in u's
// index) looked up already.
func admitAt(j *domain.Job, w *domain.Workspace, tenant *domain.Tenant, u *usage, c *cluster, at wsAt) ([]string, domain.Reason, bool) {
	if r, ok := quotaAt(j, w, tenant, u, c, at); !ok {
		return nil, r, false
	}
	cands := j.Models()
	if len(cands) == 0 {
		if !u.tracksModels() && len(c.models()) <= 1 {
			return nil, domain.Reason{}, true
		}
		cands = c.models()
	}
	need := demand(j)
	var allowed []string
	var first domain.Reason
	for _, m := range cands {
		if c.totalModel[m] == 0 {
			continue
		}
		r, ok := u.modelRoom(w, m, need, c)
		if ok {
			allowed = append(allowed, m)
		} else if first.Code == "" {
			first = r
		}
	}
	if len(allowed) == 0 {
		if first.Code == "" {
			first = domain.Reason{Code: ReasonNoInventory, Message: fmt.Sprintf("no schedulable server has %s GPUs", strings.Join(cands, " or "))}
		}
		return nil, first, false
	}
	return allowed, domain.Reason{}, true
}

// modelRoom checks one model: the workspace's quota on it, and that the
// model's free capacity, less other workspaces' protected guarantees on it,
// holds the demand.
func (u *usage) modelRoom(w *domain.Workspace, model string, need int, c *cluster) (domain.Reason, bool) {
	if !u.tracksModels() {
		return domain.Reason{}, true
	}
	wi := u.index(w.Ref())
	if q := w.Model(model); q != nil && wi >= 0 {
		used := u.mUsed[wi][model]
		if limit := (q.Guaranteed + q.BorrowLimit) * unit; used+need > limit {
			return domain.Reason{Code: ReasonWorkspaceQuota, Message: fmt.Sprintf(
				"workspace %s uses %s %s GPUs; %s more would exceed its %s limit of %s (guaranteed %d + borrowLimit %d) by %s",
				w.Ref(), gpus(used), model, gpus(need), model, gpus(limit), q.Guaranteed, q.BorrowLimit, gpus(used+need-limit))}, false
		}
	}
	free := c.totalModel[model] - u.usedModel[model]
	protected := 0
	for oi, o := range u.ix.ws {
		if oi == wi {
			continue
		}
		if q := o.Model(model); q != nil {
			protected += max(0, (q.Guaranteed-q.LendLimit)*unit-u.mUsed[oi][model])
		}
	}
	if need > free-protected {
		return domain.Reason{Code: ReasonClusterQuota, Message: fmt.Sprintf(
			"needs %s %s GPUs; %s are free but %s of them are other workspaces' %s guarantees they do not lend",
			gpus(need), model, gpus(max(0, free)), gpus(min(protected, max(0, free))), model)}, false
	}
	return domain.Reason{}, true
}

// tracksModels: some workspace has model quotas.
func (u *usage) tracksModels() bool { return u.mUsed != nil }

// addJob records a job's placements held (sign 1) or released (sign -1),
// in total and per model.
func (u *usage) addJob(j *domain.Job, pl []domain.Placement, sign int) {
	ref := j.Tenant + "/" + j.Workspace
	n := u.modelUnits(ref, pl, sign)
	u.add(j.Tenant, ref, n)
}

// addJobAt is addJob for a job of the workspace at ri and the tenant at
// ti in u's index (-1: unknown), as ix.of answers for the job's tenant
// and workspace: the step loop knows both for every job it places (the
// ref made and looked up again per placement, three look-ups with string
// keys, was about 2 ms of a burst cycle at 100,000 GPUs).
func (u *usage) addJobAt(j *domain.Job, pl []domain.Placement, sign, ri, ti int) {
	ref := ""
	if u.tracksModels() {
		ref = j.Tenant + "/" + j.Workspace
	}
	u.addAt(ri, ti, u.modelUnits(ref, pl, sign))
}

// modelUnits is the units pl holds times sign, added to the per-model
// figures of workspace ref when some workspace has model quotas.
func (u *usage) modelUnits(ref string, pl []domain.Placement, sign int) int {
	n := 0
	for _, p := range pl {
		units := placementUnits(p) * sign
		n += units
		if u.tracksModels() {
			m := u.modelOf(p.Server)
			u.usedModel[m] += units
			if i := u.index(ref); i >= 0 {
				if u.mUsed[i] == nil {
					u.mUsed[i] = map[string]int{}
				}
				u.mUsed[i][m] += units
			}
		}
	}
	return n
}

// placementUnits is the capacity one placement holds.
func placementUnits(p domain.Placement) int {
	switch {
	case p.Share > 0:
		return domain.ShareUnits(p.Share)
	case len(p.MIG) > 0:
		n := 0
		for _, s := range p.MIG {
			if u, ok := mig.Units("", s.Profile); ok {
				n += u
			}
		}
		return n
	}
	return len(p.GPUs) * unit
}

// models lists the GPU models of the cluster's servers, by name.
func (c *cluster) models() []string {
	return c.modelNames
}

// placeIn places j on one of models (nil: any server). A job that names
// models takes the first in its order that fits; a job that names none
// takes the model where it packs tightest (ties: model name order). A gang
// never spans models.
func (c *cluster) placeIn(j *domain.Job, t *domain.Tenant, models []string) ([]domain.Placement, string, domain.Reason) {
	if len(models) == 0 {
		return c.place(j, t)
	}
	ordered := len(j.Models()) > 0
	var best []domain.Placement
	bestLevel := ""
	var why []string
	var first domain.Reason
	for _, m := range models {
		jm := *j
		jm.GPUModel, jm.GPUModels = m, nil
		pl, level, r := c.place(&jm, t)
		if pl == nil {
			if first.Code == "" || (first.Code == ReasonNoInventory && r.Code != ReasonNoInventory) {
				first = r
			}
			if r.Message != "" {
				why = append(why, m+": "+r.Message)
			}
			continue
		}
		if ordered {
			return pl, level, domain.Reason{}
		}
		if best == nil || levelRank(level) < levelRank(bestLevel) {
			best, bestLevel = pl, level
		}
	}
	if best != nil {
		return best, bestLevel, domain.Reason{}
	}
	if len(why) > 1 {
		first.Message = strings.Join(why, "; ")
	}
	return nil, "", first
}

func levelRank(level string) int {
	return slices.Index([]string{LevelServer, LevelNVLinkDomain, LevelStripe, LevelFabric}, level)
}
