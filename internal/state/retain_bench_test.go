package state

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// BenchmarkRetain100k: 100,000 jobs of one tenant submitted, placed on 8
// GPUs and succeeded through the state machine's own commands, their ends
// spread over 50 days (2,000 a day); then one retention pass with the
// server's defaults (30 days, 10,000 ended jobs and 100,000 events a
// tenant, the usage archive 400 days). It reports the snapshot's bytes
// before and after, the archive's bytes per removed job, and the pass's
// apply time (ns/op, -benchtime=1x: the state is built once per op).
func BenchmarkRetain100k(b *testing.B) {
	const jobs = 100_000
	span := 50 * 24 * time.Hour
	for range b.N {
		b.StopTimer()
		h := newHarness(b).cluster(4, 32, 1024)
		step := span / jobs / 3
		h.at = h.at.Add(-span)
		apply := func(ct CommandType, payload any) any {
			h.at = h.at.Add(step)
			e, err := Encode(ct, h.at, "member:bench", payload)
			if err != nil {
				b.Fatal(err)
			}
			r := h.f.ApplyCommand(e)
			if r.Err != nil {
				b.Fatalf("%s: %v", ct, r.Err)
			}
			return r.Value
		}
		servers := h.f.Topology().Topology.Servers()
		for i := range jobs {
			id := apply(CmdJobSubmit, MakeJob("research", 8).Obj()).(*domain.Job).ID
			apply(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: id, Placements: []domain.Placement{{Server: servers[i%len(servers)].Name, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}}})
			apply(CmdJobReport, JobReport{ID: id, State: ReportSucceeded})
		}
		before := h.snapshot()
		events := len(h.f.d.Events)
		policy := Retention{EndedJobs: 30 * 24 * time.Hour, EndedJobsPerTenant: 10_000, KeepRecent: 8 * time.Hour, Events: 90 * 24 * time.Hour, EventsPerTenant: 100_000, Usage: 400 * 24 * time.Hour}
		h.at = h.at.Add(time.Minute)
		e, err := Encode(CmdRetain, h.at, "system", policy.Command(h.at))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r := h.f.ApplyCommand(e)
		b.StopTimer()
		if r.Err != nil {
			b.Fatal(r.Err)
		}
		after := h.snapshot()
		res := r.Value.(Retained)
		if res.Jobs != jobs-10_000 || res.Archived != res.Jobs {
			b.Fatalf("retention removed %+v, want %d jobs, all archived", res, jobs-10_000)
		}
		archive, _ := json.Marshal(h.f.d.Usage)
		b.ReportMetric(float64(len(before)), "snapshot-bytes-before")
		b.ReportMetric(float64(len(after)), "snapshot-bytes-after")
		b.ReportMetric(float64(len(archive))/float64(res.Archived), "archive-bytes/job")
		b.ReportMetric(float64(events), "events-before")
		b.ReportMetric(float64(len(h.f.d.Events)), "events-after")
	}
}
