package state

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// Job commands before placement: submit (with its admission checks and
// idempotency keys) and cancel.

func (f *FSM) applyJobSubmit(c *Command) (any, *domain.Error) {
	p, derr := decode[JobSubmit](c)
	if derr != nil {
		return nil, derr
	}
	s := p.Spec
	// Keys are scoped to the caller: another token's key never finds this job.
	key := ""
	if p.IdempotencyKey != "" {
		key = c.Actor + " " + p.IdempotencyKey
	}
	if id, seen := f.d.SubmitKeys[key]; seen && key != "" {
		if j, ok := f.d.Jobs[id]; ok {
			return CopyJob(j), nil
		}
	}
	if err := domain.ValidateJobSpec(&s); err != nil {
		return nil, err
	}
	if err := f.checkSubmit(&s, c.rules()); err != nil {
		return nil, err
	}
	if c.check {
		return nil, nil
	}
	id := f.d.NextJobID
	f.d.NextJobID++
	if s.Name == "" {
		s.Name = domain.DefaultJobName(id)
	}
	j := &domain.Job{
		ID: id, JobSpec: s, State: domain.JobPending,
		Reason:      &domain.Reason{Code: domain.ReasonQueued, Message: "queued: waiting for the next scheduling cycle"},
		SubmittedAt: c.At, SubmittedBy: c.Actor, UpdatedAt: c.At,
	}
	f.d.Jobs[id] = j
	f.jobs.add(j)
	if key != "" {
		f.rememberSubmitKey(key, id, c.rules())
	}
	// Strings joined, not formatted: fmt allocates for its arguments too,
	// once per submit (issue 18: the leader's bytes per command).
	f.event(c, "job.submit", "job/"+strconv.FormatUint(id, 10), s.Tenant, s.Workspace, s.Name+": "+demandString(&s))
	return CopyJob(j), nil
}

// maxSubmitKeys bounds the idempotency window: a client retries within
// seconds, and 100k submits are many minutes of the heaviest load. The
// window is the FSM's keyWindow: this, but in tests.
const maxSubmitKeys = 100_000

// rememberSubmitKey records that key made job id, under rules, and evicts
// the oldest key beyond the window. From RulesSubmitKeyOnce on a key is in
// the order once (keyOnce); before, a key remembered again (its job gone)
// stayed at its earlier place too, and that place's eviction deleted the
// key while the later one was inside the window.
func (f *FSM) rememberSubmitKey(key string, id uint64, rules int) {
	if rules >= RulesSubmitKeyOnce {
		f.keyOnce(key)
	}
	f.d.SubmitKeys[key] = id
	f.d.SubmitKeyOrder = append(f.d.SubmitKeyOrder, key)
	f.snapJobs.keysAdded++
	if len(f.d.SubmitKeyOrder) > f.keyWindow {
		delete(f.d.SubmitKeys, f.d.SubmitKeyOrder[0])
		f.d.SubmitKeyOrder = f.d.SubmitKeyOrder[1:]
	}
}

// keyOnce takes key out of SubmitKeyOrder before it is remembered again,
// so that every key in the order is there once and in the map: evicting
// the order's front then forgets a key whose only place left the window.
//
// The order is replaced, never changed in place: a raft snapshot taken
// holds the slice (snapshot.go). Both are O(n) in the window (a key again
// ~1.2 ms at 100,000 keys, the copy nearly all; made unique ~16 ms:
// docs/benchmarks.md), but rare: a key is remembered again only when its
// job was removed, and the order is made unique once, on a state that
// entries of earlier rules built.
func (f *FSM) keyOnce(key string) {
	order := f.d.SubmitKeyOrder
	if len(order) != len(f.d.SubmitKeys) {
		// Every key in the map is in the order (under any rules), so
		// equal lengths mean each key there once and in the map. Not so:
		// entries of earlier rules left a key twice, or a place whose key
		// an eviction already deleted.
		f.d.SubmitKeyOrder = onceEach(order, f.d.SubmitKeys)
		order = f.d.SubmitKeyOrder
	}
	if _, ok := f.d.SubmitKeys[key]; !ok {
		return
	}
	if i := slices.Index(order, key); i >= 0 {
		f.d.SubmitKeyOrder = slices.Concat(order[:i], order[i+1:])
	}
}

// onceEach is order with each key of m at its last place only (where it
// was last remembered: the place of the job m holds), and without the
// places whose keys m no longer holds (an earlier copy's eviction
// deleted them: that key was forgotten already, and its place would only
// keep another key from the window). A key of m with no place in order,
// which no apply leaves, is deleted from m, so that the two agree again.
func onceEach(order []string, m map[string]uint64) []string {
	placed := make(map[string]bool, len(m))
	out := make([]string, 0, len(m))
	for _, k := range slices.Backward(order) {
		if _, ok := m[k]; ok && !placed[k] {
			placed[k] = true
			out = append(out, k)
		}
	}
	slices.Reverse(out)
	if len(placed) != len(m) {
		for k := range m {
			if !placed[k] {
				delete(m, k)
			}
		}
	}
	return out
}

func (f *FSM) checkSubmit(s *domain.JobSpec, rules int) *domain.Error {
	w, ok := f.d.Workspaces[domain.Ref(s.Tenant, s.Workspace)]
	if !ok {
		return &domain.Error{Code: domain.CodeNotFound, Field: "workspace", Message: fmt.Sprintf("workspace %q not found", domain.Ref(s.Tenant, s.Workspace))}
	}
	if err := f.checkExternalID(s, rules); err != nil {
		return err
	}
	if err := f.checkPool(s, rules); err != nil {
		return err
	}
	return f.checkFits(s, w)
}

// checkFits refuses a job that could never be admitted, whatever else runs:
// better an error now than a job pending forever.
func (f *FSM) checkFits(s *domain.JobSpec, w *domain.Workspace) *domain.Error {
	if s.Driver != "" {
		found := false
		for _, srv := range f.cap.servers {
			if cmp, ok := domain.CompareVersions(srv.Driver, s.Driver); ok && cmp == 0 {
				found = true
				break
			}
		}
		if !found {
			return domain.Invalid("driver", "no server in the inventory declares driver %s", s.Driver)
		}
	}
	models := s.Models()
	accepts := func(m string) bool { return len(models) == 0 || slices.Contains(models, m) }
	what := "GPUs"
	if len(models) > 0 {
		what = strings.Join(models, " or ") + " GPUs"
		inInventory := false
		for _, m := range models {
			inInventory = inInventory || f.cap.byModel[m] > 0
		}
		if !inInventory {
			field := "gpuModel"
			if len(s.GPUModels) > 0 {
				field = "gpuModels"
			}
			return domain.Invalid(field, "the inventory has no %s", what)
		}
	}
	if s.MIGProfile != "" || s.Share > 0 {
		return f.checkFitsFractional(s, w, accepts, what)
	}
	if max := w.Guaranteed + w.BorrowLimit; s.GPUs > max {
		return domain.Invalid("gpus", "gpus %d exceeds what workspace %s may ever use (guaranteed %d + borrowLimit %d = %d)", s.GPUs, w.Ref(), w.Guaranteed, w.BorrowLimit, max)
	}
	// A gang runs on one model: the largest model it accepts bounds it, and
	// so do the workspace's model quotas.
	have, quotaMax, capped := 0, 0, true
	for m, n := range f.cap.byModel {
		if !accepts(m) {
			continue
		}
		have = max(have, n)
		if q := w.Model(m); q != nil {
			quotaMax = max(quotaMax, q.Guaranteed+q.BorrowLimit)
		} else if n > 0 {
			capped = false
		}
	}
	if s.GPUs > have {
		return domain.Invalid("gpus", "gpus %d exceeds the inventory's %d %s (a gang runs on one model)", s.GPUs, have, what)
	}
	if capped && s.GPUs > quotaMax {
		return domain.Invalid("gpus", "gpus %d exceeds what workspace %s may use of %s under its model quotas (at most %d)", s.GPUs, w.Ref(), what, quotaMax)
	}
	if s.GPUsPerNode > 0 {
		most := 0
		for m, n := range f.cap.maxPerServer {
			if accepts(m) && n > most {
				most = n
			}
		}
		if s.GPUsPerNode > most {
			return domain.Invalid("gpusPerNode", "gpusPerNode %d exceeds the largest server's %d %s", s.GPUsPerNode, most, what)
		}
	}
	return nil
}

// checkFitsFractional: a MIG profile must exist on a GPU model the
// inventory has (one the job accepts), a MIG request must fit the GPUs of
// one server, and the demand must fit the workspace's limit.
func (f *FSM) checkFitsFractional(s *domain.JobSpec, w *domain.Workspace, accepts func(string) bool, what string) *domain.Error {
	units, err := sched.Demand(s)
	if err != nil {
		return asDomainError(err)
	}
	field := "share"
	if s.MIGProfile != "" {
		field = "migCount"
		fits := false
		for m, per := range f.cap.maxPerServer {
			if !accepts(m) {
				continue
			}
			if p, err := mig.Lookup(m, s.MIGProfile); err == nil && s.MIGCount <= per*p.MaxInstances {
				fits = true
			}
		}
		if !fits {
			return domain.Invalid("migProfile", "no server in the inventory can hold %d x MIG %s of %s", s.MIGCount, s.MIGProfile, what)
		}
	} else if f.cap.total == 0 {
		return domain.Invalid("share", "the inventory has no GPUs")
	}
	if max := (w.Guaranteed + w.BorrowLimit) * domain.UnitsPerGPU; units > max {
		return domain.Invalid(field, "the request (%.2f GPUs) exceeds what workspace %s may ever use (guaranteed %d + borrowLimit %d)",
			float64(units)/domain.UnitsPerGPU, w.Ref(), w.Guaranteed, w.BorrowLimit)
	}
	return nil
}

// demandString says what a job asks for: "16 GPUs", "2 x MIG 3g.40gb",
// "0.25 of a GPU".
func demandString(s *domain.JobSpec) string {
	switch {
	case s.MIGProfile != "":
		return fmt.Sprintf("%d x MIG %s", s.MIGCount, s.MIGProfile)
	case s.Share > 0:
		return fmt.Sprintf("%g of a GPU", s.Share)
	}
	return strconv.Itoa(s.GPUs) + " GPUs"
}
func (f *FSM) applyJobCancel(c *Command) (any, *domain.Error) {
	p, derr := decode[JobCancel](c)
	if derr != nil {
		return nil, derr
	}
	j, ok := f.d.Jobs[p.ID]
	if !ok {
		return nil, domain.NotFound("job", fmt.Sprint(p.ID))
	}
	if j.State.Terminal() {
		return nil, domain.Errorf(domain.CodeFailedPrecondition, "job %d is already %s", j.ID, j.State)
	}
	if c.check {
		return nil, nil
	}
	f.end(j, domain.JobCancelled, &domain.Reason{Code: "cancelled", Message: "cancelled by " + c.Actor}, c.At)
	j.UpdatedAt = c.At
	f.jobs.touch(j)
	f.event(c, "job.cancel", fmt.Sprintf("job/%d", j.ID), j.Tenant, j.Workspace, j.Name)
	return CopyJob(j), nil
}

// CopyJob deep-copies a job: a read never aliases the state.
func CopyJob(j *domain.Job) *domain.Job {
	cp := *j
	cp.GPUModels = slices.Clone(j.GPUModels)
	// A run's End is never changed in place (endRun replaces the slice),
	// so the copy may share the times it points to.
	cp.Runs = slices.Clone(j.Runs)
	if j.Topology != nil {
		t := *j.Topology
		cp.Topology = &t
	}
	if j.Reason != nil {
		r := *j.Reason
		cp.Reason = &r
	}
	if j.PathHealth != nil {
		h := *j.PathHealth
		cp.PathHealth = &h
	}
	if j.Placement != nil {
		cp.Placement = make([]domain.Placement, len(j.Placement))
		for i, p := range j.Placement {
			cp.Placement[i] = domain.Placement{Server: p.Server, GPUs: append([]int(nil), p.GPUs...), MIG: append([]domain.MIGSlice(nil), p.MIG...),
				Share: p.Share, NVLinkDomain: p.NVLinkDomain, Leaves: append([]string(nil), p.Leaves...)}
		}
	}
	return &cp
}
