package sched

import "time"

// ScheduleExhaustive is Schedule deciding every job by full scans, without
// the cycle's scan cache (scans.go), for the equivalence test.
func ScheduleExhaustive(s *Snapshot, now time.Time) *Plan {
	cp := *s
	cp.exhaustive = true
	return Schedule(&cp, now)
}
