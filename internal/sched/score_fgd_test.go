package sched

import (
	"math"
	"testing"
)

func idle(name, model string, gpus int, cpu, mem int64) *Host {
	free := make([]int, gpus)
	for i := range free {
		free[i] = 1000
	}
	return &Host{Name: name, Model: model, Free: free, CPUMilli: cpu, CPUFree: cpu, MemoryMiB: mem, MemFree: mem}
}

// TestJobFabricTieBreaks: on FGD's rating ties the policy keeps idle
// servers whole, then prefers the smaller server; the rating itself still
// comes first. The old tie-break (stranded capacity alone) sent a 1-GPU job
// to the idle 128-CPU server below, the only one an 8-GPU job of 120 CPUs
// fits on.
func TestJobFabricTieBreaks(t *testing.T) {
	// One shape: 1 GPU, 4 CPUs (a single shape rates every placement that
	// leaves whole GPUs behind alike).
	shapes := []Shape{{CPUMilli: 4000, MemoryMiB: 1024, GPUs: 1, Milli: 1000, Freq: 1}}
	used := idle("used", "G2", 8, 96000, 393216)
	used.Free[0], used.CPUFree = 0, 90000
	tests := []struct {
		name  string
		hosts []*Host
		req   Request
		want  string
	}{
		{"a used server before an idle one", []*Host{idle("idle-small", "G2", 8, 96000, 393216), used}, Request{GPUs: 1, Milli: 1000, CPUMilli: 4000, MemoryMiB: 1024}, "used"},
		{"the smaller of two idle servers", []*Host{idle("big", "G3", 8, 128000, 786432), idle("small", "G2", 8, 96000, 393216)}, Request{GPUs: 1, Milli: 1000, CPUMilli: 4000, MemoryMiB: 1024}, "small"},
		{"a whole-server job takes the smaller idle server", []*Host{idle("big", "G3", 8, 128000, 786432), idle("small", "G2", 8, 96000, 393216)}, Request{GPUs: 8, Milli: 1000, CPUMilli: 8000, MemoryMiB: 1024}, "small"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewJobFabric(shapes)
			best, got := math.Inf(-1), ""
			for _, h := range tt.hosts {
				if s, _ := p.Score(h, &tt.req); s > best {
					best, got = s, h.Name
				}
			}
			if got != tt.want {
				t.Fatalf("placed on %s, want %s", got, tt.want)
			}
		})
	}
	// Where shapes name GPU models, only the first rule applies: two idle
	// servers of different size rate alike (topology order decides).
	bound := NewJobFabric([]Shape{shapes[0], {CPUMilli: 4000, GPUs: 1, Milli: 1000, Models: []string{"P100"}, Freq: 0.5}})
	r1 := Request{GPUs: 1, Milli: 1000, CPUMilli: 4000, MemoryMiB: 1024}
	sBig, _ := bound.Score(idle("big", "G3", 8, 128000, 786432), &r1)
	sSmall, _ := bound.Score(idle("small", "G3", 2, 16000, 122880), &r1)
	if sBig != sSmall {
		t.Fatalf("model-bound shapes: big server %v, small %v: want equal", sBig, sSmall)
	}
	sUsed, _ := bound.Score(used, &r1)
	if !(sUsed > sBig) {
		t.Fatalf("model-bound shapes: used server %v, idle %v: want the used one", sUsed, sBig)
	}

	// The rating comes first: a placement that fragments less wins over
	// keeping a server whole. A share on the used server's last half GPU
	// leaves nothing stranded; on an idle server it strands a half GPU.
	half := idle("half", "G2", 1, 96000, 393216)
	half.Free[0] = 500
	p := NewJobFabric([]Shape{{CPUMilli: 1000, GPUs: 1, Milli: 500, Freq: 1}})
	r := Request{GPUs: 1, Milli: 500, CPUMilli: 1000}
	sHalf, _ := p.Score(half, &r)
	sIdle, _ := p.Score(idle("idle", "G2", 1, 96000, 393216), &r)
	if !(sHalf > sIdle) {
		t.Fatalf("rating %v on the half-used GPU, %v on an idle one: want the half-used one", sHalf, sIdle)
	}
}
