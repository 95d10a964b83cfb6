package domain

import (
	"encoding/json"
	"testing"
	"time"
)

// TestReasonEqual: a reason with a reservation equals itself after a JSON
// round trip (the plan goes through the Raft log), so an unchanged
// reservation writes nothing; any change in code, message, start, basis or
// GPUs makes it differ.
func TestReasonEqual(t *testing.T) {
	start := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	base := func() Reason {
		return Reason{Code: "capacity", Message: "needs 8 GPUs", Reservation: &Reservation{Start: start,
			Placement: []Placement{{Server: "s1", GPUs: []int{0, 1, 2, 3}, NVLinkDomain: "s1"}}, Basis: []string{BasisExpectedDuration}}}
	}
	raw, err := json.Marshal(base())
	if err != nil {
		t.Fatal(err)
	}
	var trip Reason
	if err := json.Unmarshal(raw, &trip); err != nil {
		t.Fatal(err)
	}
	plain := Reason{Code: "capacity", Message: "needs 8 GPUs"}
	for name, tc := range map[string]struct {
		a    *Reason
		b    Reason
		want bool
	}{
		"round trip":       {&trip, base(), true},
		"no reservations":  {&plain, plain, true},
		"nil":              {nil, plain, false},
		"one reservation":  {&plain, base(), false},
		"start":            {&trip, func() Reason { r := base(); r.Reservation.Start = start.Add(time.Minute); return r }(), false},
		"basis":            {&trip, func() Reason { r := base(); r.Reservation.Basis = []string{BasisHistory}; return r }(), false},
		"gpus":             {&trip, func() Reason { r := base(); r.Reservation.Placement[0].GPUs = []int{4, 5, 6, 7}; return r }(), false},
		"message":          {&trip, func() Reason { r := base(); r.Message += "!"; return r }(), false},
		"other local zone": {&trip, func() Reason { r := base(); r.Reservation.Start = start.In(time.FixedZone("x", 3600)); return r }(), true},
	} {
		if got := tc.a.Equal(tc.b); got != tc.want {
			t.Errorf("%s: Equal = %v, want %v", name, got, tc.want)
		}
	}
}
