package state

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// BenchmarkReadsAmongLive is what the API's reads hold the read lock for
// (every apply waits meanwhile) in a state of 100,000 live jobs (2,048
// placed) of acme/research and 8 pending of globex/lab: the admin's every
// job and first page, globex's page of
// jobs, of pending jobs, of events (among 100,000 of acme's), its pools, every workspace's tally (the queue's
// counts and the metrics' sums), the nodes' use. Before the read index
// each walked every live job (or every job) whatever it answered.
func BenchmarkReadsAmongLive(b *testing.B) {
	h, _ := liveState(b, 100_000)
	apply := h.benchApply(b)
	apply(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("globex").Obj()})
	apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("globex", "lab").Guaranteed(0).Borrow(8).Obj()})
	for range 8 {
		s := MakeJob("research", 1).Obj()
		s.Spec.Tenant, s.Spec.Workspace = "globex", "lab"
		apply(CmdJobSubmit, s)
	}
	globex := func(tenant, _ string) bool { return tenant == "globex" }
	globexEvents := len(h.f.Events(EventFilter{Tenant: "globex"}))
	pendingIDs := h.f.JobIDs(JobFilter{State: domain.JobPending}, nil)
	for _, c := range []struct {
		name string
		read func() int
		want int
	}{
		// An admin's GET /v1/jobs without limit: every job before default
		// pages, the first page (server.DefaultPage) now.
		{"admin-all", func() int { js, _ := h.f.JobsPage(JobFilter{}); return len(js) }, 100_008},
		{"admin-page", func() int { js, _ := h.f.JobsPage(JobFilter{Limit: 500}); return len(js) }, 500},
		// An admin's GET /v1/queue: every pending job copied before pages
		// (queue-all); now their IDs under the lock (queue-ids), ranked
		// outside it, and the page's 500 copied (queue-page).
		{"queue-all", func() int { js, _ := h.f.JobsPage(JobFilter{State: domain.JobPending}); return len(js) }, 100_000 - 2048 + 8},
		{"queue-ids", func() int {
			return len(h.f.JobIDs(JobFilter{State: domain.JobPending}, func(j *domain.Job) bool { return globex(j.Tenant, j.Workspace) || j.Tenant != "" }))
		}, 100_000 - 2048 + 8},
		{"queue-page", func() int { return len(h.f.JobsByID(pendingIDs[len(pendingIDs)-500:], nil)) }, 500},
		{"tenant-page", func() int { js, _ := h.f.JobsPage(JobFilter{Tenant: "globex", Limit: 100}); return len(js) }, 8},
		{"tenant-pending", func() int {
			js, _ := h.f.JobsPage(JobFilter{Tenant: "globex", State: domain.JobPending})
			return len(js)
		}, 8},
		{"tenant-events", func() int { return len(h.f.Events(EventFilter{Tenant: "globex", Limit: 100})) }, globexEvents},
		{"tenant-pools", func() int { return len(h.f.PoolsNamed(globex)) }, 0},
		{"tallies", func() (n int) {
			h.f.Read(func(v View) {
				for t := range v.Tallies() {
					n += t.Pending
				}
			})
			return n
		}, 100_000 - 2048 + 8},
		{"nodes", func() int { return len(h.f.Nodes()) }, 256},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if n := c.read(); n != c.want {
					b.Fatalf("%s read %d, want %d", c.name, n, c.want)
				}
			}
		})
	}
}
