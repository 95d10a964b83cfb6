package api

import (
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

type (
	// Queue is the answer of GET /v1/queue: a page of the pending jobs
	// the caller may see, in the order the scheduler considers them, and
	// the quota use of the workspaces it may see (all of them, on every
	// page).
	Queue struct {
		// OrderedAt is when the leader's latest scheduling cycle ordered
		// the queue (unset before this leader's first cycle); jobs
		// submitted since come last, by ID.
		OrderedAt time.Time `json:"orderedAt,omitzero"`
		// Pending are the page's pending jobs in scheduling order, each
		// with the reason it waits; the Jobfabric-Continue answer header
		// carries the next page's token.
		Pending []domain.Job `json:"pending" openapi:"required"`
		// Workspaces are the workspaces' quota and use now, by tenant and
		// name: the whole queue's (their Pending counts every pending
		// job), not the page's.
		Workspaces []WorkspaceUse `json:"workspaces" openapi:"required"`
	}
	// WorkspaceUse is one workspace's quota and what it holds now, in
	// GPU-equivalents (a MIG slice its compute slices / 7, a share its
	// fraction).
	WorkspaceUse struct {
		Tenant    string `json:"tenant" openapi:"required"`
		Workspace string `json:"workspace" openapi:"required"`
		// Guaranteed, BorrowLimit and LendLimit are the workspace's quota
		// in GPUs.
		Guaranteed  int `json:"guaranteed"`
		BorrowLimit int `json:"borrowLimit"`
		LendLimit   int `json:"lendLimit"`
		// Used is what its jobs hold; Borrowed the part above Guaranteed;
		// Lent the part of its idle guarantee that other workspaces'
		// borrowing holds now (no borrower is named).
		Used     float64 `json:"used"`
		Borrowed float64 `json:"borrowed"`
		Lent     float64 `json:"lent"`
		// Pending and Running count its jobs waiting and holding GPUs.
		Pending int `json:"pending"`
		Running int `json:"running"`
	}
)
