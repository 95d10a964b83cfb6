package slurm

import (
	"fmt"
	"testing"
	"time"
)

// TestParseReservations reads scontrol show reservation -o as slurmctld
// 22.05 printed it (an active maintenance reservation of two nodes, one
// starting in two hours), and "No reservations in the system".
func TestParseReservations(t *testing.T) {
	rs, err := ParseReservations(readTestdata(t, "show-reservation.txt"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(rs)
	want := "[{maint 2026-11-27 14:42:13 +0000 UTC 2026-11-27 15:42:13 +0000 UTC [n1 n2] ACTIVE} {later 2026-11-27 16:42:13 +0000 UTC 2026-11-27 17:12:13 +0000 UTC [n3] INACTIVE}]"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if rs, err := ParseReservations("No reservations in the system\n", time.UTC); err != nil || len(rs) != 0 {
		t.Errorf("no reservations: %v, %v", rs, err)
	}
	if _, err := ParseReservations("ReservationName=x StartTime=soon EndTime=2026-11-27T15:42:13 Nodes=n1", time.UTC); err == nil {
		t.Error("a bad StartTime was read")
	}
}

// TestHolding: a node is held by a reservation active now, or by one
// starting before the job's time limit would end it (any future one for a
// job without a limit); not by an ended one, one of other nodes, or one
// starting after the job would be over.
func TestHolding(t *testing.T) {
	rs, err := ParseReservations(readTestdata(t, "show-reservation.txt"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 14, 50, 0, 0, time.UTC)
	for _, tc := range []struct {
		node  string
		now   time.Time
		limit time.Duration
		want  string
	}{
		{"n1", now, time.Hour, "[maint] 15:42"},
		{"n4", now, 0, "[] 00:00"},
		{"n3", now, time.Hour, "[] 00:00"},          // starts after the job
		{"n3", now, 3 * time.Hour, "[later] 17:12"}, // the job would run into it
		{"n3", now, 0, "[later] 17:12"},             // no limit: it would
		{"n1", now.Add(time.Hour), 0, "[] 00:00"},   // ended
	} {
		names, end := holding(rs, tc.node, tc.now, tc.limit)
		if got := fmt.Sprintf("%v %s", names, end.UTC().Format("15:04")); got != tc.want {
			t.Errorf("%s at %s, limit %s: %s, want %s", tc.node, tc.now.Format("15:04"), tc.limit, got, tc.want)
		}
	}
}
