package sched

import "time"

// ScheduleExhaustive is Schedule deciding every job by full scans, without
// the cycle's scan cache (scans.go) or ranked servers (ranked.go), for the
// equivalence tests.
func ScheduleExhaustive(s *Snapshot, now time.Time) *Plan {
	cp := *s
	cp.exhaustive = true
	return Schedule(&cp, now)
}
