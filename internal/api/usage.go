package api

import "time"

type (
	// Usage is the answer of GET /v1/usage: the GPUs held over a period,
	// grouped, from the runs the replicated state records in each job.
	Usage struct {
		// Since and Until bound the period counted, [since, until), to the
		// second.
		Since time.Time `json:"since"`
		Until time.Time `json:"until"`
		// By is the grouping: tenant, workspace, job or token.
		By string `json:"by"`
		// Rows are a page of the groups that held GPUs in the period, by
		// tenant, workspace, job, token; the Jobfabric-Continue answer
		// header carries the next page's token.
		Rows []UsageRow `json:"rows"`
		// Total sums every row of the period, not the page's; its jobs
		// count each job once.
		Total UsageFigures `json:"total"`
	}
	// UsageRow is one group's use; the key fields the grouping does not
	// use are left out.
	UsageRow struct {
		Tenant    string `json:"tenant"`
		Workspace string `json:"workspace,omitempty"`
		Job       uint64 `json:"job,omitempty"`
		JobName   string `json:"jobName,omitempty"`
		// Token is the submitting token, ROLE:ID (by job and by token).
		Token string `json:"token,omitempty"`
		UsageFigures
	}
	// UsageFigures are the sums of a group. Hours are GPU-hours: whole
	// GPUs, or GPU-equivalents (a MIG slice its compute slices / 7, a
	// time-sliced share its fraction). Guaranteed and borrowed split the
	// GPU-equivalent hours: borrowed is what a job held above its
	// workspace's guarantee, decided when it was placed.
	UsageFigures struct {
		// GPUHours counts whole GPUs only.
		GPUHours float64 `json:"gpuHours"`
		// GPUEquivalentHours counts every holding by its capacity.
		GPUEquivalentHours float64 `json:"gpuEquivalentHours"`
		// GuaranteedHours is the GPU-equivalent hours held within the
		// workspace's guarantee.
		GuaranteedHours float64 `json:"guaranteedHours"`
		// BorrowedHours is the GPU-equivalent hours held above it.
		BorrowedHours float64 `json:"borrowedHours"`
		// Jobs counts the jobs that held GPUs in the period.
		Jobs int `json:"jobs"`
		// GPUSeconds is the exact sum GPUHours comes from: whole GPUs x
		// seconds.
		GPUSeconds int64 `json:"gpuSeconds"`
		// UnitSeconds is the exact sum GPUEquivalentHours comes from:
		// capacity units (7000 to a GPU) x seconds.
		UnitSeconds int64 `json:"unitSeconds"`
	}
)
