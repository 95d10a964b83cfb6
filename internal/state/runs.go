package state

import (
	"slices"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// Runs: every holding of GPUs is recorded in the job (domain.Run) when the
// placement commits and closed when the GPUs are released, at the
// command's time, so usage accounting (internal/usage) reads the
// replicated state alone and agrees with every replica and every restart.
//
// The guaranteed/borrowed split is decided once, at placement: the units
// of the run that, added to what the job's workspace already held, exceed
// the workspace's guarantee are borrowed; the rest is guaranteed. That is
// the scheduler's own line (a workspace above its guarantee borrows, and
// reclaim takes back what it holds beyond it: sched.reclaim's candidates).
// A tenant quota bounds admission but does not move the line: reclaim
// counts per workspace.

// startRun opens a run for j, just placed at at; fit holds the state's use
// with j's placement committed.
func (f *FSM) startRun(j *domain.Job, fit *sched.Fit, at time.Time) {
	units := sched.Held(j.Placement)
	whole := 0
	for _, p := range j.Placement {
		if p.Share == 0 && len(p.MIG) == 0 {
			whole += len(p.GPUs)
		}
	}
	ref := domain.Ref(j.Tenant, j.Workspace)
	guaranteed := 0
	if w, ok := f.d.Workspaces[ref]; ok {
		guaranteed = w.Guaranteed * domain.UnitsPerGPU
	}
	borrowed := min(units, max(0, fit.Used(ref)-guaranteed))
	if len(j.Runs) >= domain.MaxJobRuns {
		// Half at a time: one archive record per MaxJobRuns/2 runs.
		f.archiveRuns(j, len(j.Runs)-(domain.MaxJobRuns/2-1))
	}
	// Copy on write: copies handed to readers never see the slice change.
	j.Runs = append(slices.Clip(j.Runs), domain.Run{Start: at, GPUs: whole, Units: units, BorrowedUnits: borrowed})
}

// archiveRuns moves j's n oldest runs, every one closed, into the usage
// archive (a record of their own, marked split, as the job's last record
// will be): a job requeued again and again keeps at most
// domain.MaxJobRuns runs, and usage reports count the moved ones from the
// archive.
func (f *FSM) archiveRuns(j *domain.Job, n int) {
	if n <= 0 || slices.ContainsFunc(j.Runs[:n], func(r domain.Run) bool { return r.End == nil }) {
		return
	}
	var last time.Time
	for _, r := range j.Runs[:n] {
		if r.End.After(last) {
			last = *r.End
		}
	}
	rec := usageRecord(&domain.Job{ID: j.ID, JobSpec: j.JobSpec, SubmittedBy: j.SubmittedBy, Runs: j.Runs[:n], EndedAt: &last})
	rec.Split = true
	f.d.Usage = mergeUsage(f.d.Usage, []domain.UsageRecord{rec})
	j.Runs = slices.Clone(j.Runs[n:])
	j.RunsArchived += n
}

// endRun closes j's open run, if any, at at: the job released its GPUs.
func endRun(j *domain.Job, at time.Time) {
	n := len(j.Runs)
	if n == 0 || j.Runs[n-1].End != nil {
		return // never placed, or placed before runs were recorded
	}
	runs := slices.Clone(j.Runs)
	runs[n-1].End = &at
	j.Runs = runs
}
