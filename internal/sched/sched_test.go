package sched

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

var now = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

// world is a fluent snapshot builder.
type world struct {
	t    *testing.T
	s    *Snapshot
	next uint64
}

func newWorld(t *testing.T, o topology.GenerateOptions) *world {
	t.Helper()
	topo, err := topology.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, next: 1, s: &Snapshot{Topology: topo, Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}}
}

func (w *world) tenant(name string, iso domain.Isolation) *world {
	w.s.Tenants[name] = &domain.Tenant{Name: name, Isolation: iso, Network: domain.NetworkPureRT5}
	return w
}

func (w *world) ws(ref string, guaranteed, borrow, lend, weight int) *world {
	t, n, _ := strings.Cut(ref, "/")
	w.s.Workspaces[ref] = &domain.Workspace{Tenant: t, Name: n, Guaranteed: guaranteed, BorrowLimit: borrow, LendLimit: lend, Weight: weight}
	return w
}

// job adds a pending job and returns the world; running adds a job holding
// the given GPUs.
func (w *world) job(ref string, gpus, perNode, prio int) *world {
	t, n, _ := strings.Cut(ref, "/")
	w.s.Jobs = append(w.s.Jobs, &domain.Job{ID: w.next, JobSpec: domain.JobSpec{Tenant: t, Workspace: n, GPUs: gpus, GPUsPerNode: perNode, Priority: prio}, State: domain.JobPending})
	w.next++
	return w
}

func (w *world) running(ref string, pl ...domain.Placement) *world {
	t, n, _ := strings.Cut(ref, "/")
	g := 0
	for _, p := range pl {
		g += len(p.GPUs)
	}
	w.s.Jobs = append(w.s.Jobs, &domain.Job{ID: w.next, JobSpec: domain.JobSpec{Tenant: t, Workspace: n, GPUs: g}, State: domain.JobRunning, Placement: pl})
	w.next++
	return w
}

func on(server string, gpus ...int) domain.Placement {
	return domain.Placement{Server: server, GPUs: gpus}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// got renders a plan compactly: "job -> server:gpus,... (level)" or "job: code".
func render(p *Plan) map[uint64]string {
	out := map[uint64]string{}
	for _, pl := range p.Placements {
		var parts []string
		for _, x := range pl.Placement {
			parts = append(parts, fmt.Sprintf("%s:%s", x.Server, ints(x.GPUs)))
		}
		out[pl.JobID] = strings.Join(parts, " ") + " (" + pl.Level + ")"
	}
	for id, r := range p.Pending {
		out[id] = "pending " + r.Code
	}
	return out
}

func ints(xs []int) string {
	if len(xs) > 1 && xs[len(xs)-1]-xs[0] == len(xs)-1 {
		return fmt.Sprintf("%d-%d", xs[0], xs[len(xs)-1])
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func dgx(stripes, servers int) topology.GenerateOptions {
	return topology.GenerateOptions{Stripes: stripes, ServersPerStripe: servers, GPUsPerServer: 8}
}

// planCase is one scheduling scenario: a world and, per job, the rendered
// outcome it must get.
type planCase struct {
	world func(t *testing.T) *world
	want  map[uint64]string
}

// runPlanCases schedules each case and checks the outcomes, that every
// pending reason has a message, and that the plan is deterministic.
func runPlanCases(t *testing.T, cases map[string]planCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := tc.world(t)
			plan := Schedule(w.s, now)
			got := render(plan)
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("job %d: got %q (%s), want %q", id, got[id], plan.Pending[id].Message, want)
				}
			}
			for _, r := range plan.Pending {
				if r.Message == "" {
					t.Errorf("pending reason %s without a message", r.Code)
				}
			}
			if again := Schedule(w.s, now); !reflect.DeepEqual(again, plan) {
				t.Error("the same snapshot gave a different plan")
			}
		})
	}
}

func TestSchedule(t *testing.T) {
	cases := map[string]planCase{
		"gang of two whole servers packs into one stripe": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(2, 4)).tenant("acme", domain.IsolationServer).ws("acme/r", 64, 0, 0, 1).
					running("acme/r", on("s1-gpu001", seq(0, 8)...), on("s1-gpu002", seq(0, 8)...), on("s1-gpu003", seq(0, 8)...)).
					job("acme/r", 16, 8, 0)
			},
			// stripe 1 has one free server, stripe 2 four: the gang stays in stripe 2.
			want: map[uint64]string{2: "s2-gpu001:0-7 s2-gpu002:0-7 (stripe)"},
		},
		"single-server job takes the fullest server that fits (best fit)": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 4)).tenant("g", domain.IsolationGPU).ws("g/w", 32, 0, 0, 1).
					running("g/w", on("s1-gpu002", seq(0, 6)...)).
					job("g/w", 2, 0, 0)
			},
			want: map[uint64]string{2: "s1-gpu002:6-7 (server)"},
		},
		"server isolation: nobody joins a server-isolated tenant's server": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 2)).tenant("acme", domain.IsolationServer).tenant("glx", domain.IsolationGPU).
					ws("acme/r", 8, 0, 0, 1).ws("glx/w", 8, 0, 0, 1).
					running("acme/r", on("s1-gpu001", 0, 1)).
					job("glx/w", 6, 0, 0)
			},
			want: map[uint64]string{2: "s1-gpu002:0-5 (server)"},
		},
		"server isolation: a server-isolated tenant takes no shared server": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 2)).tenant("acme", domain.IsolationServer).tenant("glx", domain.IsolationGPU).
					ws("acme/r", 8, 8, 0, 1).ws("glx/w", 4, 0, 0, 1).
					running("glx/w", on("s1-gpu001", 0), on("s1-gpu002", 0)).
					job("acme/r", 2, 0, 0)
			},
			want: map[uint64]string{2: "pending capacity"},
		},
		"gpu isolation: two tenants share a server, never a GPU": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 1)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 4, 0, 0, 1).ws("b/w", 4, 0, 0, 1).
					job("a/w", 4, 0, 0).job("b/w", 4, 0, 0)
			},
			want: map[uint64]string{1: "s1-gpu001:0-3 (server)", 2: "s1-gpu001:4-7 (server)"},
		},
		"rails stay aligned across the servers of a gang": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 3)).tenant("g", domain.IsolationGPU).ws("g/w", 24, 0, 0, 1).
					running("g/w", on("s1-gpu001", seq(0, 4)...)).
					running("g/w", on("s1-gpu002", seq(4, 8)...)).
					job("g/w", 8, 4, 0)
			},
			// s1-gpu001 has 4-7 free, s1-gpu002 0-3: no common set; s1-gpu003 pairs with either.
			want: map[uint64]string{3: "s1-gpu002:0-3 s1-gpu003:0-3 (stripe)"},
		},
		"NVL72-style domain: the gang stays inside one NVLink domain": {
			world: func(t *testing.T) *world {
				o := topology.GenerateOptions{Stripes: 1, ServersPerStripe: 8, GPUsPerServer: 4, NVLinkDomainSize: 16}
				return newWorld(t, o).tenant("g", domain.IsolationGPU).ws("g/w", 32, 0, 0, 1).
					running("g/w", on("s1-gpu001", seq(0, 4)...)).
					job("g/w", 12, 4, 0)
			},
			// domain 1 (gpu001-004) has 3 free servers, domain 2 four: the snuggest domain that fits wins.
			want: map[uint64]string{2: "s1-gpu002:0-3 s1-gpu003:0-3 s1-gpu004:0-3 (nvlink-domain)"},
		},
		"default shape: 12 GPUs become 2 x 6, rail-aligned": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 2)).tenant("g", domain.IsolationGPU).ws("g/w", 16, 0, 0, 1).job("g/w", 12, 0, 0)
			},
			want: map[uint64]string{1: "s1-gpu001:0-5 s1-gpu002:0-5 (stripe)"},
		},
		"workspace limit": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 4)).tenant("g", domain.IsolationGPU).ws("g/w", 8, 4, 0, 1).
					running("g/w", on("s1-gpu001", seq(0, 8)...)).job("g/w", 8, 0, 0)
			},
			want: map[uint64]string{2: "pending workspace_quota"},
		},
		"borrowing idle guarantee within the lend limit": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 4)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 32, 0, 16, 1).ws("b/w", 0, 32, 0, 1).
					job("b/w", 16, 8, 0).job("b/w", 8, 0, 0)
			},
			// a lends 16 of its idle 32: b gets 16, not 24.
			want: map[uint64]string{1: "s1-gpu001:0-7 s1-gpu002:0-7 (stripe)", 2: "pending cluster_quota"},
		},
		"guaranteed demand is served from the protected part": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 4)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 32, 0, 16, 1).ws("b/w", 0, 32, 0, 1).
					running("b/w", on("s1-gpu001", seq(0, 8)...), on("s1-gpu002", seq(0, 8)...)).
					job("a/w", 16, 8, 0)
			},
			want: map[uint64]string{2: "s1-gpu003:0-7 s1-gpu004:0-7 (stripe)"},
		},
		"capacity: no placement fits, quota allows": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 2)).tenant("g", domain.IsolationGPU).ws("g/w", 16, 0, 0, 1).
					running("g/w", on("s1-gpu001", 0)).job("g/w", 8, 8, 0).job("g/w", 8, 8, 0)
			},
			want: map[uint64]string{2: "s1-gpu002:0-7 (server)", 3: "pending workspace_quota"},
		},
		"higher priority first; lower waits behind it in its workspace": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 1)).tenant("g", domain.IsolationGPU).ws("g/w", 8, 0, 0, 1).
					job("g/w", 8, 0, 0).job("g/w", 8, 0, 5)
			},
			want: map[uint64]string{2: "s1-gpu001:0-7 (server)", 1: "pending workspace_quota"},
		},
		"a blocked big job holds back smaller ones of its workspace only": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 3)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 0, 24, 0, 1).ws("b/w", 0, 8, 0, 1).
					running("a/w", on("s1-gpu001", 0)).running("b/w", on("s1-gpu002", 0)).
					job("a/w", 16, 8, 0).job("a/w", 1, 0, 0).job("b/w", 1, 0, 0)
			},
			// 22 GPUs are free but only one server is whole: the 2 x 8 gang waits.
			want: map[uint64]string{3: "pending capacity", 4: "pending queued_behind", 5: "s1-gpu001:1 (server)"},
		},
		"fair share: the borrower with less usage per weight goes first": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 2)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 0, 16, 0, 1).ws("b/w", 0, 16, 0, 4).
					running("a/w", on("s1-gpu001", 0, 1)).running("b/w", on("s1-gpu001", 2, 3, 4, 5)).
					placedAgo(1, time.Hour).placedAgo(2, time.Hour).
					job("a/w", 8, 0, 0).job("b/w", 8, 0, 0)
			},
			// a: 2/1 = 2, b: 4/4 = 1: b first, and only one 8-GPU server is free.
			want: map[uint64]string{3: "pending capacity", 4: "s1-gpu002:0-7 (server)"},
		},
		"fair share decays: old usage counts less than recent usage": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 1)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 0, 8, 0, 1).ws("b/w", 0, 8, 0, 1).job("b/w", 8, 0, 0).job("a/w", 8, 0, 0)
				ended := func(ws string, start, end time.Duration) *domain.Job {
					s, e := now.Add(-start), now.Add(-end)
					t, n, _ := strings.Cut(ws, "/")
					return &domain.Job{JobSpec: domain.JobSpec{Tenant: t, Workspace: n, GPUs: 8}, State: domain.JobSucceeded, PlacedAt: &s, EndedAt: &e}
				}
				// a used 8 GPUs for 2h ending 5h ago; b for 1h ending 10m ago.
				w.s.History = []*domain.Job{ended("a/w", 7*time.Hour, 5*time.Hour), ended("b/w", 70*time.Minute, 10*time.Minute)}
				return w
			},
			want: map[uint64]string{2: "s1-gpu001:0-7 (server)", 1: "pending capacity"},
		},
		"required NVLink domain: waits rather than spans domains": {
			world: func(t *testing.T) *world {
				o := topology.GenerateOptions{Stripes: 1, ServersPerStripe: 8, GPUsPerServer: 4, NVLinkDomainSize: 16}
				w := newWorld(t, o).tenant("g", domain.IsolationGPU).ws("g/w", 32, 0, 0, 1).
					running("g/w", on("s1-gpu001", 0)).running("g/w", on("s1-gpu005", 0)).
					job("g/w", 16, 4, 0).job("g/w", 16, 4, 0)
				w.s.Jobs[2].Topology = &domain.TopologyRequirement{Level: domain.TopologyNVLinkDomain, Required: true}
				return w
			},
			// Each 4-server domain has 3 whole servers free: 4 servers only span domains.
			want: map[uint64]string{3: "pending topology", 4: "pending queued_behind"},
		},
		"preferred NVLink domain: spans a stripe when no domain fits": {
			world: func(t *testing.T) *world {
				o := topology.GenerateOptions{Stripes: 1, ServersPerStripe: 8, GPUsPerServer: 4, NVLinkDomainSize: 16}
				w := newWorld(t, o).tenant("g", domain.IsolationGPU).ws("g/w", 32, 0, 0, 1).
					running("g/w", on("s1-gpu001", 0)).running("g/w", on("s1-gpu005", 0)).
					job("g/w", 16, 4, 0)
				w.s.Jobs[2].Topology = &domain.TopologyRequirement{Level: domain.TopologyNVLinkDomain}
				return w
			},
			want: map[uint64]string{3: "s1-gpu002:0-3 s1-gpu003:0-3 s1-gpu004:0-3 s1-gpu006:0-3 (stripe)"},
		},
		"gpu model": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 1)).tenant("g", domain.IsolationGPU).ws("g/w", 8, 0, 0, 1).job("g/w", 1, 0, 0)
				w.s.Jobs[0].GPUModel = "A100-80GB"
				return w
			},
			want: map[uint64]string{1: "pending no_inventory"},
		},
	}
	runPlanCases(t, cases)
}

func TestReasonsNameNoOtherTenant(t *testing.T) {
	w := newWorld(t, dgx(1, 2)).tenant("acme", domain.IsolationGPU).tenant("secretcorp", domain.IsolationGPU).
		ws("acme/w", 0, 16, 0, 1).ws("secretcorp/hidden", 16, 0, 0, 1).job("acme/w", 8, 0, 0)
	r := Schedule(w.s, now).Pending[1]
	if r.Code != ReasonClusterQuota || strings.Contains(r.Message, "secretcorp") || strings.Contains(r.Message, "hidden") {
		t.Fatalf("reason %+v: want cluster_quota that names no other tenant", r)
	}
	if !strings.Contains(r.Message, "16") {
		t.Fatalf("reason %q does not say how much is protected", r.Message)
	}
}

func BenchmarkSchedule(b *testing.B) {
	topo, _ := topology.Generate(topology.GenerateOptions{Stripes: 8, ServersPerStripe: 32, GPUsPerServer: 8})
	s := &Snapshot{Topology: topo, Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
	for i := 0; i < 8; i++ {
		t := fmt.Sprintf("t%d", i)
		s.Tenants[t] = &domain.Tenant{Name: t, Isolation: domain.IsolationGPU}
		s.Workspaces[t+"/w"] = &domain.Workspace{Tenant: t, Name: "w", Guaranteed: 256, BorrowLimit: 512, LendLimit: 128, Weight: 1}
	}
	id := uint64(1)
	for i := 0; i < 1000; i++ {
		g := []int{1, 2, 4, 8, 16, 32}[i%6]
		per := 0
		if g > 8 {
			per = 8
		}
		s.Jobs = append(s.Jobs, &domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: fmt.Sprintf("t%d", i%8), Workspace: "w", GPUs: g, GPUsPerNode: per}, State: domain.JobPending})
		id++
	}
	b.ResetTimer()
	for b.Loop() {
		Schedule(s, now)
	}
}

func TestNodeConditionsAndResidency(t *testing.T) {
	cases := map[string]planCase{
		"cordoned servers take nothing new and their free GPUs are no capacity": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 2)).tenant("g", domain.IsolationGPU).ws("g/w", 16, 0, 0, 1).job("g/w", 16, 8, 0).job("g/w", 8, 0, 0)
				w.s.Nodes = map[string]domain.NodeCondition{"s1-gpu001": {Server: "s1-gpu001", Cordoned: true}}
				return w
			},
			// Job 1 cannot fit the 8 schedulable GPUs at all, so it holds nothing back.
			want: map[uint64]string{1: "pending capacity", 2: "s1-gpu002:0-7 (server)"},
		},
		"unhealthy server skipped": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 2)).tenant("g", domain.IsolationGPU).ws("g/w", 16, 0, 0, 1).job("g/w", 8, 0, 0)
				w.s.Nodes = map[string]domain.NodeCondition{"s1-gpu001": {Server: "s1-gpu001", Unhealthy: true}}
				return w
			},
			want: map[uint64]string{1: "s1-gpu002:0-7 (server)"},
		},
		"data residency: a tenant limited to another site waits": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 1)).tenant("g", domain.IsolationGPU).ws("g/w", 8, 0, 0, 1).job("g/w", 1, 0, 0)
				w.s.Tenants["g"].Sites = []string{"eu-west"}
				return w
			},
			want: map[uint64]string{1: "pending capacity"},
		},
		"minimum driver": {
			world: func(t *testing.T) *world {
				// Two workspaces, so the refused job holds nothing back.
				w := newWorld(t, dgx(1, 1)).tenant("g", domain.IsolationGPU).ws("g/w", 4, 0, 0, 1).ws("g/x", 4, 0, 0, 1).
					job("g/w", 1, 0, 0).job("g/x", 1, 0, 0)
				w.s.Jobs[0].MinDriver = "550.54"    // generated servers run 535.183.01
				w.s.Jobs[1].MinDriver = "535.104.5" // older than 535.183.01: accepted
				return w
			},
			want: map[uint64]string{1: "pending capacity", 2: "s1-gpu001:0 (server)"},
		},
		"exact driver": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 1)).tenant("g", domain.IsolationGPU).ws("g/w", 4, 0, 0, 1).ws("g/x", 4, 0, 0, 1).
					job("g/w", 1, 0, 0).job("g/x", 1, 0, 0)
				w.s.Jobs[0].Driver = "535.104.05" // not what the servers run
				w.s.Jobs[1].Driver = "535.183.01" // exactly what they run
				return w
			},
			want: map[uint64]string{1: "pending capacity", 2: "s1-gpu001:0 (server)"},
		},
	}
	runPlanCases(t, cases)
}

func TestDrainPreemptsWithGrace(t *testing.T) {
	w := newWorld(t, dgx(1, 2)).tenant("g", domain.IsolationGPU).ws("g/w", 16, 0, 0, 1).
		running("g/w", on("s1-gpu001", 0, 1)).running("g/w", on("s1-gpu002", 0))
	w.s.Nodes = map[string]domain.NodeCondition{"s1-gpu001": {Server: "s1-gpu001", Draining: true}}
	plan := Schedule(w.s, now)
	if len(plan.Preemptions) != 1 || plan.Preemptions[0].JobID != 1 || plan.Preemptions[0].Reason.Code != "drained" || !plan.Preemptions[0].Deadline.Equal(now.Add(DefaultPolicy.Grace)) {
		t.Fatalf("preemptions %+v: want job 1 drained with the grace deadline", plan.Preemptions)
	}
}

func TestPlacementNamesDomainAndLeaves(t *testing.T) {
	w := newWorld(t, dgx(1, 2)).tenant("g", domain.IsolationGPU).ws("g/w", 16, 0, 0, 1).job("g/w", 8, 4, 0)
	plan := Schedule(w.s, now)
	if len(plan.Placements) != 1 {
		t.Fatalf("plan %+v", plan)
	}
	for _, p := range plan.Placements[0].Placement {
		if p.NVLinkDomain != p.Server {
			t.Errorf("%s: NVLink domain %q, want the server's own", p.Server, p.NVLinkDomain)
		}
		want := []string{"s1-leaf0", "s1-leaf1", "s1-leaf2", "s1-leaf3"}
		if strings.Join(p.Leaves, ",") != strings.Join(want, ",") {
			t.Errorf("%s: leaves %v, want %v (GPU i on the leaf of rail i)", p.Server, p.Leaves, want)
		}
	}
}

func TestTenantQuota(t *testing.T) {
	cases := map[string]planCase{
		"a tenant's borrow limit caps its workspaces together": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 4)).tenant("a", domain.IsolationGPU).ws("a/x", 8, 8, 0, 1).ws("a/y", 8, 8, 0, 1).
					running("a/x", on("s1-gpu001", seq(0, 8)...)).running("a/y", on("s1-gpu002", seq(0, 8)...)).
					job("a/x", 8, 0, 0)
				w.s.Tenants["a"].Quota = &domain.TenantQuota{Guaranteed: 16, BorrowLimit: 4}
				return w
			},
			want: map[uint64]string{3: "pending tenant_quota"},
		},
		"a tenant lends other tenants no more than its lend limit": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 3)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/x", 8, 8, 8, 1).ws("a/y", 8, 8, 8, 1).ws("b/w", 0, 24, 0, 1).
					job("b/w", 16, 8, 0).job("a/y", 16, 8, 0)
				w.s.Tenants["a"].Quota = &domain.TenantQuota{Guaranteed: 16, BorrowLimit: 8, LendLimit: 0}
				return w
			},
			// b may use only the 8 unguaranteed GPUs, not a's idle 16; inside
			// tenant a, y borrows x's lendable 8.
			want: map[uint64]string{1: "pending cluster_quota", 2: "s1-gpu001:0-7 s1-gpu002:0-7 (stripe)"},
		},
	}
	runPlanCases(t, cases)
}

// BenchmarkScheduleReclaim: a full 2,048-GPU cluster lent out to borrowers
// (preemptible 8-GPU jobs), and 200 pending jobs within their guarantees:
// every one needs a reclaim search.
func BenchmarkScheduleReclaim(b *testing.B) {
	topo, _ := topology.Generate(topology.GenerateOptions{Stripes: 8, ServersPerStripe: 32, GPUsPerServer: 8})
	s := &Snapshot{Topology: topo, Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
	s.Tenants["lender"] = &domain.Tenant{Name: "lender", Isolation: domain.IsolationGPU}
	s.Tenants["borrower"] = &domain.Tenant{Name: "borrower", Isolation: domain.IsolationGPU}
	s.Workspaces["lender/w"] = &domain.Workspace{Tenant: "lender", Name: "w", Guaranteed: 2048, LendLimit: 2048, Weight: 1}
	s.Workspaces["borrower/w"] = &domain.Workspace{Tenant: "borrower", Name: "w", BorrowLimit: 2048, Weight: 1}
	id := uint64(1)
	for _, srv := range topo.Servers() {
		t := now.Add(-time.Duration(id) * time.Minute)
		s.Jobs = append(s.Jobs, &domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: "borrower", Workspace: "w", GPUs: 8, Preemptible: true},
			State: domain.JobRunning, PlacedAt: &t, Placement: []domain.Placement{{Server: srv.Name, GPUs: seq(0, 8)}}})
		id++
	}
	for i := 0; i < 200; i++ {
		g := []int{1, 8, 16}[i%3]
		per := 0
		if g > 8 {
			per = 8
		}
		s.Jobs = append(s.Jobs, &domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: "lender", Workspace: "w", GPUs: g, GPUsPerNode: per}, State: domain.JobPending})
		id++
	}
	b.ResetTimer()
	for b.Loop() {
		p := Schedule(s, now)
		if len(p.Preemptions) == 0 {
			b.Fatal("no reclaim")
		}
	}
}
