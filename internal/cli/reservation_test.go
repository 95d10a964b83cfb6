package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestReservationLines: job explain and a dry run print when and where a
// waiting job is reserved, and on what estimates; nothing without one.
func TestReservationLines(t *testing.T) {
	start := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	pl := []domain.Placement{{Server: "s1-gpu001", GPUs: []int{0, 1, 2, 3}}, {Server: "s1-gpu002", GPUs: []int{4, 5, 6, 7}}}
	for name, tc := range map[string]struct {
		r    *domain.Reservation
		want string
	}{
		"none": {nil, ""},
		"timed": {&domain.Reservation{Start: start, Placement: pl, Basis: []string{domain.BasisExpectedDuration, domain.BasisTimeLimit}},
			"  reserved from 2026-11-22T09:00:00Z (estimated from running jobs' expected duration, time limit):\n    s1-gpu001 GPUs 0,1,2,3\n    s1-gpu002 GPUs 4,5,6,7\n"},
		"overdue": {&domain.Reservation{Placement: pl[:1], Basis: []string{domain.BasisHistory}},
			"  reserved as soon as running jobs past their estimated end stop (estimated from running jobs' history):\n    s1-gpu001 GPUs 0,1,2,3\n"},
		"unknown": {&domain.Reservation{Placement: pl[:1], Basis: []string{domain.BasisUnknown}},
			"  reserved once running jobs with no time limit, expected duration or history stop:\n    s1-gpu001 GPUs 0,1,2,3\n"},
	} {
		var b strings.Builder
		reservationLines(&b, tc.r)
		if b.String() != tc.want {
			t.Errorf("%s:\n%q\nwant\n%q", name, b.String(), tc.want)
		}
	}
}
