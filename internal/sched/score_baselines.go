package sched

import (
	"math/rand"
	"slices"
)

// Baseline scorers: the policies the FGD paper (Weng et al., USENIX ATC
// 2023) compares against, as its simulator implements them, so the trace
// simulator can run them through the real placement code. Scores are
// integers 0..100 like Kubernetes node scores (ties are then common and go
// to topology order, which a simulator may shuffle per seed). CPU and GPU
// figures are normalised by the largest openb server (128 CPUs, 8 GPUs).

// Normalisation of the baselines' resource vectors.
const (
	maxSpecCPU = 128000 // milli-CPU
	maxSpecGPU = 8000   // milli-GPU
)

// Random rates every feasible server with a random number: a uniformly
// random server, and for a share a uniformly random GPU with room.
type Random struct{ Rand *rand.Rand }

// Name implements Scorer.
func (Random) Name() string { return "random" }

// Uncached implements Uncached.
func (Random) Uncached() {}

// Score implements Scorer.
func (s Random) Score(h *Host, r *Request) (float64, int) {
	gpu := -1
	if r.Share() {
		n := 0
		for g, f := range h.Free {
			if f >= r.Milli {
				n++
				if s.Rand.Intn(n) == 0 {
					gpu = g
				}
			}
		}
	}
	return s.Rand.Float64(), gpu
}

// bestGPU is the GPU with the least idle capacity that still holds milli
// (lowest index on ties).
func bestGPU(free []int, milli int) int {
	best := -1
	for g, f := range free {
		if f >= milli && (best < 0 || f < free[best]) {
			best = g
		}
	}
	return best
}

// BestFit prefers the server left with the least CPU and GPU:
// 100 x (1 - [0.5 (cpu left - cpu asked)/128 CPUs + 0.5 (GPU left - GPU
// asked)/8 GPUs]); a share takes the fullest GPU that holds it.
type BestFit struct{}

// Name implements Scorer.
func (BestFit) Name() string { return "bestfit" }

// Score implements Scorer.
func (BestFit) Score(h *Host, r *Request) (float64, int) {
	var s float64
	s += float64(h.CPUFree-r.CPUMilli) / maxSpecCPU * 0.5
	s += float64(h.FreeMilli()-r.GPUs*r.Milli) / maxSpecGPU * 0.5
	s = (1.0 - s) * 100
	return float64(int64(s)), bestGPU(h.Free, r.Milli)
}

// DotProd is Tetris's alignment heuristic: the smaller the dot product of
// the server's free (CPU, GPU) vector and the request's, both normalised by
// the largest server, the better; a share takes the fullest GPU.
type DotProd struct{}

// Name implements Scorer.
func (DotProd) Name() string { return "dotprod" }

// Score implements Scorer.
func (DotProd) Score(h *Host, r *Request) (float64, int) {
	dot := float64(h.CPUFree)/maxSpecCPU*(float64(r.CPUMilli)/maxSpecCPU) +
		float64(h.FreeMilli())/maxSpecGPU*(float64(r.GPUs*r.Milli)/maxSpecGPU)
	s := 1 - dot/2
	return float64(int64(100 * s)), bestGPU(h.Free, r.Milli)
}

// GpuClustering puts jobs of one kind (shares, 1-GPU, 2-GPU, ...) together:
// servers holding only that kind, then mixed servers holding it, then idle
// servers, then servers of other kinds, each band fuller first.
type GpuClustering struct{}

// Name implements Scorer.
func (GpuClustering) Name() string { return "gpuclustering" }

// Score implements Scorer.
func (GpuClustering) Score(h *Host, r *Request) (float64, int) {
	if r.GPUs == 0 {
		return 0, -1
	}
	kind := r.GPUs
	if r.Share() {
		kind = 0
	}
	fill := int64(25) * int64(maxSpecGPU-h.FreeMilli()) / maxSpecGPU
	var band int64
	switch {
	case h.Jobs[kind] > 0 && len(h.Jobs) == 1:
		band = 75
	case h.Jobs[kind] > 0:
		band = 50
	case len(h.Jobs) == 0:
		band = 25
	}
	return float64(fill + band), bestGPU(h.Free, r.Milli)
}

// GpuPacking prefers, in this order: GPUs already shared (the fuller the
// better), then free GPUs of a server in use (the fewer taken the better),
// then an idle server (the smaller the better).
type GpuPacking struct{}

// Name implements Scorer.
func (GpuPacking) Name() string { return "gpupacking" }

// Score implements Scorer.
func (GpuPacking) Score(h *Host, r *Request) (float64, int) {
	gpu := bestGPU(h.Free, r.Milli)
	if r.GPUs == 0 || r.Milli == 0 {
		return 0, gpu
	}
	full := h.FullyFree()
	if full == len(h.Free) {
		return float64(max(int64(100/3-full), int64(full))), gpu
	}
	idx := make([]int, len(h.Free))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return h.Free[a] - h.Free[b] })
	need, whole, ratio := r.GPUs, 0, int64(0)
	for _, g := range idx {
		if need == 0 {
			break
		}
		if r.Milli <= h.Free[g] {
			need--
			if h.Free[g] == 1000 {
				whole++
			}
			ratio += int64(h.Free[g]) * 100 / 1000
		}
	}
	if whole > 0 {
		return float64(max(int64(100/2-whole), 100/3)), gpu
	}
	return float64(max(100-ratio/10, 100/2)), gpu
}
