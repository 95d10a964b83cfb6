package server

import (
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// TestIdleUntil: an idle cycle holds until the first thing time alone
// changes: a deadline, a backoff's end, an expected end, or the recheck.
func TestIdleUntil(t *testing.T) {
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	placed := at(-time.Hour)
	for _, tc := range []struct {
		name string
		jobs []*domain.Job
		next time.Time
		want time.Time
	}{
		{"nothing due: the recheck", nil, time.Time{}, now.Add(30 * time.Second)},
		{"a deadline", nil, now.Add(5 * time.Second), now.Add(5 * time.Second)},
		{"a deadline already due", nil, now.Add(-time.Second), now},
		{"a backoff ends", []*domain.Job{{State: domain.JobPending, BorrowNotBefore: at(7 * time.Second)}}, time.Time{}, now.Add(7 * time.Second)},
		{"a backoff ended", []*domain.Job{{State: domain.JobPending, BorrowNotBefore: at(-time.Second)}}, time.Time{}, now.Add(30 * time.Second)},
		{"an expected end", []*domain.Job{{State: domain.JobRunning, PlacedAt: placed, JobSpec: domain.JobSpec{ExpectedDurationSeconds: 3610}}}, time.Time{}, now.Add(10 * time.Second)},
		{"a time limit", []*domain.Job{{State: domain.JobRunning, PlacedAt: placed, JobSpec: domain.JobSpec{TimeLimitSeconds: 3620}}}, now.Add(25 * time.Second), now.Add(20 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := idleUntil(&sched.Snapshot{Jobs: tc.jobs}, &sched.Plan{Next: tc.next}, now, 30*time.Second)
			if !got.Equal(tc.want) {
				t.Fatalf("idle until %v, want %v", got, tc.want)
			}
		})
	}
	c := idleCycle{ok: true, applied: 7, until: now.Add(time.Second)}
	if !c.holds(7, now) || c.holds(8, now) || c.holds(7, now.Add(time.Second)) || (idleCycle{}).holds(0, now) {
		t.Fatal("an idle cycle holds only on the same applied index before its end")
	}
}
