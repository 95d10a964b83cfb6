package domain

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestUsageRecordJSON: the archive's compact encoding round-trips (times
// to the second, UTC; a default name left out and restored; several runs;
// a split job's record)
// and refuses run fields that are not groups of five.
func TestUsageRecordJSON(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	for _, u := range []UsageRecord{
		{Job: 42, Name: "job-42", Tenant: "acme", Workspace: "research", SubmittedBy: "member:tok", EndedAt: t0.Add(2 * time.Hour),
			Runs: []Run{{Start: t0, End: at(time.Hour), GPUs: 8, Units: 56000, BorrowedUnits: 7000}, {Start: t0.Add(90 * time.Minute), End: at(2 * time.Hour), Units: 3000}}},
		{Job: 7, Name: "train", Tenant: "beta", Workspace: "lab", EndedAt: t0, Runs: []Run{}},
		{Job: 9, Name: "requeued", Tenant: "beta", Workspace: "lab", EndedAt: t0.Add(time.Hour), Runs: []Run{{Start: t0, End: at(time.Hour), GPUs: 1, Units: 7000}}, Split: true},
	} {
		b, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		if u.Name == "job-42" && strings.Contains(string(b), "job-42") {
			t.Errorf("%s: the default name is stored", b)
		}
		var got UsageRecord
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, u) {
			t.Errorf("round trip of %s:\n got %+v\nwant %+v", b, got, u)
		}
	}
	var u UsageRecord
	if err := json.Unmarshal([]byte(`[1,"","acme","ws","",0,[1,2,3]]`), &u); err == nil {
		t.Error("a record with 3 run fields decoded")
	}
}
