package sched

import (
	"slices"
	"testing"
)

// wholeGPUsBySets is wholeGPUs as it was before it tried indexSets'
// windows in place (verbatim): the first of indexSets' sets wholly free,
// else the lowest-indexed free GPUs.
func wholeGPUsBySets(v *server, n int) []int {
	for _, set := range indexSets(len(v.free), n) {
		if hasAll(v, set) {
			return set
		}
	}
	out := make([]int, 0, n)
	for g, f := range v.free {
		if f && len(out) < n {
			out = append(out, g)
		}
	}
	return out
}

// TestWholeGPUsAsSets compares wholeGPUs with the sets it stands for on
// every free pattern of servers of 1 to 10 GPUs and every request size
// that fits the free count. It fails when the aligned windows are not
// tried first and when the last window is left out (each tried), and
// when two answers share their GPUs (a placement's own slice).
func TestWholeGPUsAsSets(t *testing.T) {
	for size := 1; size <= 10; size++ {
		for mask := 0; mask < 1<<size; mask++ {
			v := &server{free: make([]bool, size)}
			for g := range size {
				if mask&(1<<g) != 0 {
					v.free[g] = true
					v.nfree++
				}
			}
			for n := 1; n <= v.nfree; n++ {
				got, want := wholeGPUs(v, n), wholeGPUsBySets(v, n)
				if !slices.Equal(got, want) {
					t.Fatalf("size %d, free %0*b, %d GPUs: %v, by the sets %v", size, size, mask, n, got, want)
				}
				if again := wholeGPUs(v, n); len(again) > 0 && &again[0] == &got[0] {
					t.Fatalf("size %d, free %0*b, %d GPUs: two answers share their GPUs", size, size, mask, n)
				}
			}
		}
	}
}
