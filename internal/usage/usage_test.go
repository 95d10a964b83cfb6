package usage

import (
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// jobs is a Source over a fixed list: the live ones and the ended ones.
type jobs []*domain.Job

func (js jobs) LiveJobs() iter.Seq[*domain.Job] {
	return func(yield func(*domain.Job) bool) {
		for _, j := range js {
			if !j.State.Terminal() && !yield(j) {
				return
			}
		}
	}
}

func (js jobs) EndedSince(since time.Time) iter.Seq[*domain.Job] {
	return func(yield func(*domain.Job) bool) {
		for _, j := range js {
			if j.State.Terminal() && j.EndedAt.After(since) && !yield(j) {
				return
			}
		}
	}
}

// ArchivedSince: a fixed list has no archive (state_test.go tests it
// against the state machine's).
func (js jobs) ArchivedSince(time.Time) iter.Seq[*domain.UsageRecord] {
	return func(func(*domain.UsageRecord) bool) {}
}

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

const u = domain.UnitsPerGPU

// jb builds a job of ref ("tenant/workspace") submitted by token.
type jb struct{ j *domain.Job }

func job(id uint64, ref, token string) *jb {
	t, w, _ := cut(ref)
	return &jb{&domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: t, Workspace: w, Name: "j" + string(rune('a'+id%26))},
		State: domain.JobRunning, SubmittedBy: token}}
}

func cut(ref string) (string, string, bool) {
	for i := range ref {
		if ref[i] == '/' {
			return ref[:i], ref[i+1:], true
		}
	}
	return ref, "", false
}

// run adds a run from start to end after t0 (end < 0: still held).
func (b *jb) run(start, end time.Duration, gpus, units, borrowed int) *jb {
	r := domain.Run{Start: t0.Add(start), GPUs: gpus, Units: units, BorrowedUnits: borrowed}
	if end >= 0 {
		e := t0.Add(end)
		r.End = &e
	}
	b.j.Runs = append(b.j.Runs, r)
	return b
}

// ended makes the job terminal at its last run's end (or at end after t0).
func (b *jb) ended(end time.Duration) *jb {
	e := t0.Add(end)
	b.j.State, b.j.EndedAt = domain.JobSucceeded, &e
	return b
}

func (b *jb) obj() *domain.Job { return b.j }

func fig(gpuSec, unitSec, borrowedSec int64, n int) Figures {
	return Figures{GPUSeconds: gpuSec, UnitSeconds: unitSec, BorrowedUnitSeconds: borrowedSec, Jobs: n}
}

func TestCompute(t *testing.T) {
	h := time.Hour
	cases := map[string]struct {
		jobs       []*domain.Job
		q          Query // Since, Until, Now as offsets are filled below when zero
		since      time.Duration
		until, now time.Duration
		want       []Row
		wantHours  [4]float64 // total GPU, GPU-equivalent, guaranteed, borrowed hours
	}{
		"8 GPUs for an hour is 8 GPU-hours": {
			jobs:  []*domain.Job{job(1, "acme/research", "member:t1").run(0, h, 8, 8*u, 0).ended(h).obj()},
			since: -h, until: 2 * h, now: 3 * h,
			want:      []Row{{Key{Tenant: "acme"}, fig(8*3600, 8*u*3600, 0, 1)}},
			wantHours: [4]float64{8, 8, 8, 0},
		},
		"2 x MIG 3g.40gb and a 0.25 share count as GPU-equivalents, not GPUs": {
			jobs: []*domain.Job{
				job(1, "glx/w", "member:t1").run(0, h, 0, 6000, 0).ended(h).obj(),
				job(2, "glx/w", "member:t1").run(0, 2*h, 0, 1750, 0).ended(2 * h).obj(),
			},
			since: 0, until: 3 * h, now: 3 * h,
			want:      []Row{{Key{Tenant: "glx"}, fig(0, 6000*3600+1750*7200, 0, 2)}},
			wantHours: [4]float64{0, 6.0/7 + 0.5, 6.0/7 + 0.5, 0},
		},
		"preempted and requeued: both runs, not the gap": {
			jobs:  []*domain.Job{job(1, "acme/research", "member:t1").run(0, h, 8, 8*u, 0).run(3*h, 4*h, 8, 8*u, 0).ended(4 * h).obj()},
			since: 0, until: 5 * h, now: 5 * h,
			want:      []Row{{Key{Tenant: "acme"}, fig(16*3600, 16*u*3600, 0, 1)}},
			wantHours: [4]float64{16, 16, 16, 0},
		},
		"a run straddling the guarantee splits into guaranteed and borrowed": {
			jobs:  []*domain.Job{job(1, "acme/research", "member:t1").run(0, h, 8, 8*u, 4*u).ended(h).obj()},
			since: 0, until: h, now: h,
			want:      []Row{{Key{Tenant: "acme"}, fig(8*3600, 8*u*3600, 4*u*3600, 1)}},
			wantHours: [4]float64{8, 8, 4, 4},
		},
		"clipped to the period, to the second": {
			jobs:  []*domain.Job{job(1, "acme/research", "member:t1").run(0, 2*h, 8, 8*u, 0).ended(2 * h).obj()},
			since: 30*time.Minute + time.Second, until: h, now: 3 * h,
			want: []Row{{Key{Tenant: "acme"}, fig(8*1799, 8*u*1799, 0, 1)}},
		},
		"sub-second times count to the second (truncated)": {
			jobs:  []*domain.Job{job(1, "acme/research", "member:t1").run(900*time.Millisecond, h+200*time.Millisecond, 1, u, 0).ended(h + 200*time.Millisecond).obj()},
			since: 0, until: 2 * h, now: 2 * h,
			want: []Row{{Key{Tenant: "acme"}, fig(3600, u*3600, 0, 1)}},
		},
		"a running job counts up to now, not to a later until": {
			jobs:  []*domain.Job{job(1, "acme/research", "member:t1").run(0, -1, 4, 4*u, 0).obj()},
			since: 0, until: 24 * h, now: h,
			want:      []Row{{Key{Tenant: "acme"}, fig(4*3600, 4*u*3600, 0, 1)}},
			wantHours: [4]float64{4, 4, 4, 0},
		},
		"a running job counts up to until when until is past": {
			jobs:  []*domain.Job{job(1, "acme/research", "member:t1").run(0, -1, 4, 4*u, 0).obj()},
			since: 0, until: h, now: 5 * h,
			want: []Row{{Key{Tenant: "acme"}, fig(4*3600, 4*u*3600, 0, 1)}},
		},
		"runs outside the period and jobs never placed count nothing": {
			jobs: []*domain.Job{
				job(1, "acme/research", "member:t1").run(0, h, 8, 8*u, 0).ended(h).obj(),
				job(2, "acme/research", "member:t1").obj(),
				job(3, "acme/research", "member:t1").run(3*h, -1, 8, 8*u, 0).obj(),
			},
			since: h, until: 3 * h, now: 4 * h,
			want: []Row{},
		},
		"by workspace": {
			jobs: []*domain.Job{
				job(1, "acme/research", "member:t1").run(0, h, 8, 8*u, 0).ended(h).obj(),
				job(2, "acme/prod", "member:t2").run(0, h, 2, 2*u, 0).ended(h).obj(),
				job(3, "acme/research", "member:t1").run(0, h, 1, u, u).ended(h).obj(),
			},
			q:     Query{By: ByWorkspace},
			since: 0, until: h, now: h,
			want: []Row{
				{Key{Tenant: "acme", Workspace: "prod"}, fig(2*3600, 2*u*3600, 0, 1)},
				{Key{Tenant: "acme", Workspace: "research"}, fig(9*3600, 9*u*3600, u*3600, 2)},
			},
			wantHours: [4]float64{11, 11, 10, 1},
		},
		"by token, within each tenant": {
			jobs: []*domain.Job{
				job(1, "acme/research", "member:t1").run(0, h, 8, 8*u, 0).ended(h).obj(),
				job(2, "acme/prod", "admin:root").run(0, h, 2, 2*u, 0).ended(h).obj(),
				job(3, "glx/w", "admin:root").run(0, h, 1, u, 0).ended(h).obj(),
			},
			q:     Query{By: ByToken},
			since: 0, until: h, now: h,
			want: []Row{
				{Key{Tenant: "acme", Token: "admin:root"}, fig(2*3600, 2*u*3600, 0, 1)},
				{Key{Tenant: "acme", Token: "member:t1"}, fig(8*3600, 8*u*3600, 0, 1)},
				{Key{Tenant: "glx", Token: "admin:root"}, fig(3600, u*3600, 0, 1)},
			},
		},
		"by job, filtered to a tenant": {
			jobs: []*domain.Job{
				job(2, "acme/research", "member:t1").run(0, h, 8, 8*u, 0).ended(h).obj(),
				job(1, "acme/prod", "member:t2").run(0, h, 2, 2*u, 0).ended(h).obj(),
				job(3, "glx/w", "admin:root").run(0, h, 1, u, 0).ended(h).obj(),
			},
			q:     Query{By: ByJob, Tenant: "acme"},
			since: 0, until: h, now: h,
			want: []Row{
				{Key{Tenant: "acme", Workspace: "prod", Job: 1, JobName: "jb", Token: "member:t2"}, fig(2*3600, 2*u*3600, 0, 1)},
				{Key{Tenant: "acme", Workspace: "research", Job: 2, JobName: "jc", Token: "member:t1"}, fig(8*3600, 8*u*3600, 0, 1)},
			},
			wantHours: [4]float64{10, 10, 10, 0},
		},
		"filtered to a workspace": {
			jobs: []*domain.Job{
				job(1, "acme/research", "member:t1").run(0, h, 8, 8*u, 0).ended(h).obj(),
				job(2, "acme/prod", "member:t2").run(0, h, 2, 2*u, 0).ended(h).obj(),
			},
			q:     Query{Tenant: "acme", Workspace: "prod"},
			since: 0, until: h, now: h,
			want: []Row{{Key{Tenant: "acme"}, fig(2*3600, 2*u*3600, 0, 1)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := tstime.NewFake(t0.Add(tc.now))
			q := tc.q
			q.Since, q.Until, q.Now = t0.Add(tc.since), t0.Add(tc.until), clk.Now()
			rep, err := Compute(jobs(tc.jobs), q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rep.Rows, tc.want) {
				t.Fatalf("rows\n got %+v\nwant %+v", rep.Rows, tc.want)
			}
			var total Figures
			for _, r := range tc.want {
				total.add(r.Figures)
			}
			if rep.Total != total {
				t.Fatalf("total %+v, want the rows' sum %+v", rep.Total, total)
			}
			if tc.wantHours != ([4]float64{}) {
				got := [4]float64{rep.Total.GPUHours(), rep.Total.GPUEquivalentHours(), rep.Total.GuaranteedHours(), rep.Total.BorrowedHours()}
				if got != tc.wantHours {
					t.Fatalf("hours (GPU, GPU-equivalent, guaranteed, borrowed) = %v, want %v", got, tc.wantHours)
				}
			}
		})
	}
}

func TestComputeRefusesBadQueries(t *testing.T) {
	cases := map[string]struct {
		q     Query
		field string
	}{
		"until before since": {q: Query{Since: t0, Until: t0.Add(-time.Hour), Now: t0}, field: "until"},
		"empty period":       {q: Query{Since: t0, Until: t0.Add(500 * time.Millisecond), Now: t0}, field: "until"},
		"unknown by":         {q: Query{Since: t0, Until: t0.Add(time.Hour), By: "gpu"}, field: "by"},
		"workspace alone":    {q: Query{Since: t0, Until: t0.Add(time.Hour), Workspace: "prod"}, field: "tenant"},
	}
	for name, tc := range cases {
		_, err := Compute(jobs(nil), tc.q)
		if e, ok := err.(*domain.Error); !ok || e.Field != tc.field || e.Code != domain.CodeInvalidArgument {
			t.Errorf("%s: %v, want an invalid-argument error on %s", name, err, tc.field)
		}
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ok := map[string]time.Time{
		"30d":                       now.Add(-30 * 24 * time.Hour),
		"12h":                       now.Add(-12 * time.Hour),
		"90m":                       now.Add(-90 * time.Minute),
		"1d12h":                     now.Add(-36 * time.Hour),
		"0s":                        now,
		"2026-11-01T00:00:00Z":      time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		"2026-11-01T01:00:00+01:00": time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
	}
	for in, want := range ok {
		got, err := ParseTime("since", in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yesterday", "-1h", "+1h", "30", "d", "1d-1h", "99999d", "2026-11-01", "1dd", "3w"} {
		_, err := ParseTime("until", in, now)
		if e, ok := err.(*domain.Error); !ok || e.Field != "until" {
			t.Errorf("ParseTime(%q): %v, want an error on until", in, err)
		}
	}
}

func TestParseBy(t *testing.T) {
	for in, want := range map[string]By{"": ByTenant, "tenant": ByTenant, "Workspace": ByWorkspace, "job": ByJob, "TOKEN": ByToken} {
		if got, err := ParseBy(in); err != nil || got != want {
			t.Errorf("ParseBy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseBy("server"); err == nil {
		t.Error("ParseBy accepted server")
	}
}
