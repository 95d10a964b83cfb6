package sched

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
)

// TestFit: the plan applier's check refuses placements that do not match
// their job's request or break a rule, with the reason's code, and
// commits those that fit so later checks see them.
func TestFit(t *testing.T) {
	const a, b, c = "s1-gpu001", "s1-gpu002", "s2-gpu001"
	mk := func(mod func(*domain.JobSpec)) *domain.Job {
		j := &domain.Job{ID: 99, JobSpec: domain.JobSpec{Tenant: "acme", Workspace: "r", GPUs: 8}, State: domain.JobPending}
		if mod != nil {
			mod(&j.JobSpec)
		}
		return j
	}
	cases := []struct {
		name string
		job  *domain.Job
		pl   []domain.Placement
		want string // reason code, "" when it fits
	}{
		{"whole server", mk(nil), []domain.Placement{domaintest.On(b, domaintest.Seq(0, 8)...)}, ""},
		{"GPUs in use", mk(nil), []domain.Placement{domaintest.On(a, domaintest.Seq(0, 8)...)}, ReasonCapacity},
		{"too few GPUs", mk(nil), []domain.Placement{domaintest.On(b, domaintest.Seq(0, 4)...)}, ReasonPlanMismatch},
		{"no such GPU", mk(nil), []domain.Placement{domaintest.On(b, domaintest.Seq(1, 9)...)}, ReasonPlanMismatch},
		{"GPU named twice", mk(nil), []domain.Placement{domaintest.On(b, 0, 0, 1, 2, 3, 4, 5, 6)}, ReasonPlanMismatch},
		{"unknown server", mk(nil), []domain.Placement{domaintest.On("nope", domaintest.Seq(0, 8)...)}, ReasonCapacity},
		{"no placement", mk(nil), nil, ReasonPlanMismatch},
		{"gang rail-aligned", mk(func(s *domain.JobSpec) { s.GPUsPerNode = 4 }), []domain.Placement{domaintest.On(b, 0, 1, 2, 3), domaintest.On(c, 0, 1, 2, 3)}, ""},
		{"gang not rail-aligned", mk(func(s *domain.JobSpec) { s.GPUsPerNode = 4 }), []domain.Placement{domaintest.On(b, 0, 1, 2, 3), domaintest.On(c, 4, 5, 6, 7)}, ReasonPlanMismatch},
		{"gpusPerNode", mk(func(s *domain.JobSpec) { s.GPUsPerNode = 4 }), []domain.Placement{domaintest.On(b, domaintest.Seq(0, 8)...)}, ReasonPlanMismatch},
		{"required stripe spans stripes", mk(func(s *domain.JobSpec) {
			s.GPUsPerNode = 4
			s.Topology = &domain.TopologyRequirement{Level: domain.TopologyStripe, Required: true}
		}), []domain.Placement{domaintest.On(b, 0, 1, 2, 3), domaintest.On(c, 0, 1, 2, 3)}, ReasonTopology},
		{"workspace quota", mk(func(s *domain.JobSpec) { s.GPUs = 32 }), []domain.Placement{domaintest.On(b, domaintest.Seq(0, 8)...)}, ReasonWorkspaceQuota},
		{"unknown workspace", mk(func(s *domain.JobSpec) { s.Workspace = "gone" }), []domain.Placement{domaintest.On(b, domaintest.Seq(0, 8)...)}, ReasonUnknown},
		{"share on a whole GPU in use", mk(func(s *domain.JobSpec) { s.GPUs, s.Share = 0, 0.5 }), []domain.Placement{{Server: a, GPUs: []int{0}, Share: 0.5}}, ReasonCapacity},
		{"share of the wrong size", mk(func(s *domain.JobSpec) { s.GPUs, s.Share = 0, 0.5 }), []domain.Placement{{Server: b, GPUs: []int{0}, Share: 0.25}}, ReasonPlanMismatch},
		{"share", mk(func(s *domain.JobSpec) { s.GPUs, s.Share = 0, 0.5 }), []domain.Placement{{Server: b, GPUs: []int{0}, Share: 0.5}}, ""},
		{"MIG at a start the geometry forbids", mk(func(s *domain.JobSpec) { s.GPUs, s.MIGProfile, s.MIGCount = 0, "3g.40gb", 1 }),
			[]domain.Placement{{Server: b, GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "3g.40gb", Start: 2}}}}, ReasonCapacity},
		{"MIG of another profile", mk(func(s *domain.JobSpec) { s.GPUs, s.MIGProfile, s.MIGCount = 0, "3g.40gb", 1 }),
			[]domain.Placement{{Server: b, GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "4g.40gb", Start: 0}}}}, ReasonPlanMismatch},
		{"MIG", mk(func(s *domain.JobSpec) { s.GPUs, s.MIGProfile, s.MIGCount = 0, "3g.40gb", 1 }),
			[]domain.Placement{{Server: b, GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "3g.40gb", Start: 4}}}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := domaintest.NewWorld(t, domaintest.DGX(2, 2)).
				Tenant(domaintest.MakeTenant("acme").Isolation(domain.IsolationGPU)).
				Workspace(domaintest.MakeWorkspace("acme", "r").Guaranteed(16).Borrow(8).Weight(1)).
				Running(domaintest.MakeJob("acme/r", 0), domaintest.On(a, domaintest.Seq(0, 8)...))
			w.Jobs = append(w.Jobs, tc.job)
			f := NewFit(snapshotOf(w), now)
			r, ok := f.Place(tc.job, tc.pl)
			if ok != (tc.want == "") || r.Code != tc.want {
				t.Fatalf("Place = %t %+v, want code %q", ok, r, tc.want)
			}
			if !ok {
				return
			}
			// Committed: the same placement does not fit twice.
			again := *tc.job
			again.ID++
			if _, ok := f.Place(&again, tc.pl); ok && tc.job.JobSpec.Share == 0 {
				t.Fatal("a committed placement fits again")
			}
		})
	}
}
