// Package domaintest builds domain objects for tests, fluently, as kueue's
// testing wrappers do: MakeJob("acme/research", 8).PerNode(8).Spec(). One
// vocabulary for the scheduler's worlds, the FSM's commands and the
// server's seeds, so a test reads the same in every package.
package domaintest

import (
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// Now is the instant worlds are built at unless told otherwise.
var Now = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

// TenantBuilder builds a tenant: server isolation and a pure RT-5 network
// unless told otherwise.
type TenantBuilder struct{ t domain.Tenant }

// MakeTenant starts a tenant.
func MakeTenant(name string) *TenantBuilder {
	return &TenantBuilder{domain.Tenant{Name: name, Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}}
}

func (b *TenantBuilder) Isolation(i domain.Isolation) *TenantBuilder  { b.t.Isolation = i; return b }
func (b *TenantBuilder) Network(n domain.NetworkModel) *TenantBuilder { b.t.Network = n; return b }
func (b *TenantBuilder) Sites(s ...string) *TenantBuilder             { b.t.Sites = s; return b }

// Quota sets the tenant-wide quota over all its workspaces.
func (b *TenantBuilder) Quota(guaranteed, borrow, lend int) *TenantBuilder {
	b.t.Quota = &domain.TenantQuota{Guaranteed: guaranteed, BorrowLimit: borrow, LendLimit: lend}
	return b
}

// Obj returns the tenant.
func (b *TenantBuilder) Obj() domain.Tenant { return b.t }

// WorkspaceBuilder builds a workspace of weight 1 and no quota.
type WorkspaceBuilder struct{ w domain.Workspace }

// MakeWorkspace starts a workspace.
func MakeWorkspace(tenant, name string) *WorkspaceBuilder {
	return &WorkspaceBuilder{domain.Workspace{Tenant: tenant, Name: name, Weight: 1}}
}

func (b *WorkspaceBuilder) Guaranteed(n int) *WorkspaceBuilder { b.w.Guaranteed = n; return b }
func (b *WorkspaceBuilder) Borrow(n int) *WorkspaceBuilder     { b.w.BorrowLimit = n; return b }
func (b *WorkspaceBuilder) Lend(n int) *WorkspaceBuilder       { b.w.LendLimit = n; return b }
func (b *WorkspaceBuilder) Weight(n int) *WorkspaceBuilder     { b.w.Weight = n; return b }
func (b *WorkspaceBuilder) Priority(n int) *WorkspaceBuilder   { b.w.Priority = n; return b }

// ModelQuota adds a per-model quota carved out of the workspace's own.
func (b *WorkspaceBuilder) ModelQuota(m string, guaranteed, borrow, lend int) *WorkspaceBuilder {
	b.w.Models = append(b.w.Models, domain.ModelQuota{Model: m, Guaranteed: guaranteed, BorrowLimit: borrow, LendLimit: lend})
	return b
}

// Obj returns the workspace.
func (b *WorkspaceBuilder) Obj() domain.Workspace { return b.w }

// JobBuilder builds a job spec of a workspace named "tenant/workspace";
// Obj hands it over as T, the spec itself or a package's own command that
// carries it (the FSM's JobSubmit).
type JobBuilder[T any] struct {
	s   domain.JobSpec
	obj func(domain.JobSpec) T
}

// MakeJob starts a job of gpus whole GPUs in ref ("tenant/workspace").
func MakeJob(ref string, gpus int) *JobBuilder[domain.JobSpec] {
	return MakeJobOf(ref, gpus, func(s domain.JobSpec) domain.JobSpec { return s })
}

// MakeJobOf starts a job whose Obj wraps the spec with obj.
func MakeJobOf[T any](ref string, gpus int, obj func(domain.JobSpec) T) *JobBuilder[T] {
	t, w, _ := strings.Cut(ref, "/")
	return &JobBuilder[T]{s: domain.JobSpec{Tenant: t, Workspace: w, GPUs: gpus}, obj: obj}
}

func (b *JobBuilder[T]) Name(n string) *JobBuilder[T]        { b.s.Name = n; return b }
func (b *JobBuilder[T]) PerNode(n int) *JobBuilder[T]        { b.s.GPUsPerNode = n; return b }
func (b *JobBuilder[T]) Priority(n int) *JobBuilder[T]       { b.s.Priority = n; return b }
func (b *JobBuilder[T]) Preemptible() *JobBuilder[T]         { b.s.Preemptible = true; return b }
func (b *JobBuilder[T]) Model(m string) *JobBuilder[T]       { b.s.GPUModel = m; return b }
func (b *JobBuilder[T]) Models(m ...string) *JobBuilder[T]   { b.s.GPUModels = m; return b }
func (b *JobBuilder[T]) Driver(v string) *JobBuilder[T]      { b.s.Driver = v; return b }
func (b *JobBuilder[T]) MinDriver(v string) *JobBuilder[T]   { b.s.MinDriver = v; return b }
func (b *JobBuilder[T]) ExternalID(id string) *JobBuilder[T] { b.s.ExternalID = id; return b }
func (b *JobBuilder[T]) Pool(p string) *JobBuilder[T]        { b.s.Pool = p; return b }
func (b *JobBuilder[T]) TimeLimit(secs int64) *JobBuilder[T] { b.s.TimeLimitSeconds = secs; return b }
func (b *JobBuilder[T]) MinRuntime(secs int64) *JobBuilder[T] {
	b.s.MinRuntimeSeconds = secs
	return b
}

// Expect sets the expected duration and the time limit, in seconds.
func (b *JobBuilder[T]) Expect(d, limit int64) *JobBuilder[T] {
	b.s.ExpectedDurationSeconds, b.s.TimeLimitSeconds = d, limit
	return b
}

// MIG asks for count instances of a MIG profile instead of whole GPUs.
func (b *JobBuilder[T]) MIG(profile string, count int) *JobBuilder[T] {
	b.s.GPUs, b.s.MIGProfile, b.s.MIGCount = 0, profile, count
	return b
}

// Share asks for a time-sliced fraction of one GPU instead of whole GPUs.
func (b *JobBuilder[T]) Share(f float64) *JobBuilder[T] { b.s.GPUs, b.s.Share = 0, f; return b }

// Topology asks the gang to stay inside one level of the topology.
func (b *JobBuilder[T]) Topology(level string, required bool) *JobBuilder[T] {
	b.s.Topology = &domain.TopologyRequirement{Level: level, Required: required}
	return b
}

// Spec returns the job spec.
func (b *JobBuilder[T]) Spec() domain.JobSpec { return b.s }

// Obj returns the job spec wrapped as the builder was made to.
func (b *JobBuilder[T]) Obj() T { return b.obj(b.s) }

// On is a placement on a server's GPUs.
func On(server string, gpus ...int) domain.Placement {
	return domain.Placement{Server: server, GPUs: gpus}
}

// Seq is the GPU indices [from, to).
func Seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// World is a cluster as the scheduler sees it: a generated topology, its
// tenants, workspaces, jobs (IDs from 1 in the order added), node
// conditions and recently ended jobs.
type World struct {
	T          testing.TB
	Now        time.Time
	Topology   *domain.Topology
	Tenants    map[string]*domain.Tenant
	Workspaces map[string]*domain.Workspace
	Jobs       []*domain.Job
	Nodes      map[string]domain.NodeCondition
	History    []*domain.Job
	// Next is the ID the next job gets.
	Next uint64
}

// NewWorld generates the topology o describes, empty otherwise.
func NewWorld(t testing.TB, o topology.GenerateOptions) *World {
	t.Helper()
	topo, err := topology.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	return &World{T: t, Now: Now, Topology: topo, Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}, Next: 1}
}

// DGX is a generated topology of stripes x servers with 8 GPUs each.
func DGX(stripes, servers int) topology.GenerateOptions {
	return topology.GenerateOptions{Stripes: stripes, ServersPerStripe: servers, GPUsPerServer: 8}
}

// Tenant adds a tenant.
func (w *World) Tenant(b *TenantBuilder) *World {
	t := b.Obj()
	w.Tenants[t.Name] = &t
	return w
}

// Workspace adds a workspace.
func (w *World) Workspace(b *WorkspaceBuilder) *World {
	ws := b.Obj()
	w.Workspaces[ws.Tenant+"/"+ws.Name] = &ws
	return w
}

// Pending adds a pending job.
func (w *World) Pending(b *JobBuilder[domain.JobSpec]) *World {
	w.add(&domain.Job{JobSpec: b.Spec(), State: domain.JobPending})
	return w
}

// Running adds a running job holding pl; a job asking for no GPUs asks for
// the whole GPUs it holds.
func (w *World) Running(b *JobBuilder[domain.JobSpec], pl ...domain.Placement) *World {
	s := b.Spec()
	if s.GPUs == 0 && s.MIGCount == 0 && s.Share == 0 {
		for _, p := range pl {
			s.GPUs += len(p.GPUs)
		}
	}
	w.add(&domain.Job{JobSpec: s, State: domain.JobRunning, Placement: pl})
	return w
}

func (w *World) add(j *domain.Job) {
	j.ID = w.Next
	w.Next++
	w.Jobs = append(w.Jobs, j)
}

// Job returns the job of an ID, failing the test when there is none.
func (w *World) Job(id uint64) *domain.Job {
	for _, j := range w.Jobs {
		if j.ID == id {
			return j
		}
	}
	w.T.Fatalf("no job %d", id)
	return nil
}

// With changes a job in place.
func (w *World) With(id uint64, f func(*domain.Job)) *World {
	f(w.Job(id))
	return w
}

// PlacedAgo marks a job placed (and started) d before Now.
func (w *World) PlacedAgo(id uint64, d time.Duration) *World {
	t := w.Now.Add(-d)
	return w.With(id, func(j *domain.Job) { j.PlacedAt, j.StartedAt = &t, &t })
}

// Node sets a server's condition.
func (w *World) Node(c domain.NodeCondition) *World {
	if w.Nodes == nil {
		w.Nodes = map[string]domain.NodeCondition{}
	}
	w.Nodes[c.Server] = c
	return w
}

// Ended adds a job of the history: it held its GPUs from start to end
// before Now.
func (w *World) Ended(b *JobBuilder[domain.JobSpec], start, end time.Duration) *World {
	s, e := w.Now.Add(-start), w.Now.Add(-end)
	w.History = append(w.History, &domain.Job{JobSpec: b.Spec(), State: domain.JobSucceeded, PlacedAt: &s, EndedAt: &e})
	return w
}
