package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// mixed makes the first a100 servers of a 1-stripe, n-server cluster
// A100-80GB; the rest stay H100-80GB.
func (w *world) mixed(a100 int) *world {
	srv := w.s.Topology.Sites[0].Fabrics[0].Servers
	for i := range srv {
		srv[i].GPUModel = "H100-80GB"
		if i < a100 {
			srv[i].GPUModel = "A100-80GB"
		}
	}
	return w
}

func (w *world) models(id uint64, m ...string) *world {
	w.s.Jobs[id-1].GPUModels = m
	return w
}

func (w *world) modelQuota(ref, model string, g, borrow, lend int) *world {
	ws := w.s.Workspaces[ref]
	ws.Models = append(ws.Models, domain.ModelQuota{Model: model, Guaranteed: g, BorrowLimit: borrow, LendLimit: lend})
	return w
}

// Servers s1-gpu001 and s1-gpu002 are A100, s1-gpu003 and s1-gpu004 H100.
func TestGPUModels(t *testing.T) {
	runPlanCases(t, map[string]planCase{
		"a job takes its first model that fits": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 4)).mixed(2).tenant("g", domain.IsolationGPU).ws("g/w", 0, 64, 0, 1).
					running("g/w", on("s1-gpu001", seq(0, 8)...), on("s1-gpu002", seq(0, 8)...)).
					job("g/w", 8, 0, 0).job("g/w", 4, 0, 0)
				return w.models(2, "A100-80GB", "H100-80GB").models(3, "H100-80GB", "A100-80GB")
			},
			want: map[uint64]string{2: "s1-gpu003:0-7 (server)", 3: "s1-gpu004:0-3 (server)"},
		},
		"a job of listed models waits when none has room": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 4)).mixed(2).tenant("g", domain.IsolationGPU).ws("g/w", 0, 64, 0, 1).
					running("g/w", on("s1-gpu001", seq(0, 8)...), on("s1-gpu002", seq(0, 8)...)).
					job("g/w", 8, 0, 0)
				return w.models(2, "A100-80GB")
			},
			want: map[uint64]string{2: "pending capacity"},
		},
		"a gang never spans models": {
			world: func(t *testing.T) *world {
				// One free A100 and one free H100 server: 16 GPUs free, but
				// not two servers of one model.
				return newWorld(t, dgx(1, 4)).mixed(2).tenant("g", domain.IsolationGPU).ws("g/w", 0, 64, 0, 1).
					running("g/w", on("s1-gpu001", seq(0, 8)...), on("s1-gpu003", seq(0, 8)...)).
					job("g/w", 16, 8, 0)
			},
			want: map[uint64]string{2: "pending capacity"},
		},
		"a model quota caps that model only": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 4)).mixed(2).tenant("g", domain.IsolationGPU).ws("g/w", 8, 32, 0, 1).
					modelQuota("g/w", "H100-80GB", 8, 0, 0).
					running("g/w", on("s1-gpu003", seq(0, 8)...)).
					job("g/w", 8, 0, 0).job("g/w", 8, 0, 1)
				return w.models(2, "H100-80GB")
			},
			// Job 3 (first in line) takes any model: not H100, where its
			// workspace holds its 8 already, so an A100. Job 2 asks for
			// H100 only and waits on the model quota.
			want: map[uint64]string{2: "pending workspace_quota", 3: "s1-gpu001:0-7 (server)"},
		},
		"another workspace's model guarantee protects that model": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 4)).mixed(2).tenant("g", domain.IsolationGPU).tenant("h", domain.IsolationGPU).
					ws("h/w", 16, 0, 0, 1).modelQuota("h/w", "H100-80GB", 16, 0, 0).
					ws("g/w", 0, 64, 0, 1).
					running("g/w", on("s1-gpu001", seq(0, 8)...)).
					job("g/w", 8, 0, 0).job("g/w", 8, 0, 0)
			},
			// The idle H100 guarantee is not lent: the first job gets the
			// free A100 server, the second nothing.
			want: map[uint64]string{2: "s1-gpu002:0-7 (server)", 3: "pending cluster_quota"},
		},
	})
}

// A job waiting for capacity is told when running jobs are expected to
// free GPUs, from their expected durations and time limits.
func TestExpectedReleaseHint(t *testing.T) {
	w := newWorld(t, dgx(1, 1)).tenant("g", domain.IsolationGPU).ws("g/w", 0, 16, 0, 1).
		running("g/w", on("s1-gpu001", seq(0, 8)...)).job("g/w", 8, 0, 0)
	placed := now.Add(-time.Hour)
	w.s.Jobs[0].PlacedAt = &placed
	w.s.Jobs[0].ExpectedDurationSeconds = 2 * 3600
	w.s.Jobs[0].TimeLimitSeconds = 3 * 3600
	r := Schedule(w.s, now).Pending[2]
	want := now.Add(time.Hour).UTC().Format(time.RFC3339)
	if r.Code != ReasonCapacity || !strings.Contains(r.Message, want) {
		t.Fatalf("reason %+v: want capacity naming %s", r, want)
	}
	// Without estimates there is nothing to say.
	w.s.Jobs[0].ExpectedDurationSeconds, w.s.Jobs[0].TimeLimitSeconds = 0, 0
	if r := Schedule(w.s, now).Pending[2]; strings.Contains(r.Message, "free up") {
		t.Fatalf("reason %+v names a release time without any estimate", r)
	}
}
