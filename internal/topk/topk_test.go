package topk

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSmallest: the k smallest in order, and whether more were left out,
// against a sort of the whole list, for every k around the list's size,
// with repeated values.
func TestSmallest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 7, 64, 333} {
		xs := make([]int, n)
		for i := range xs {
			xs[i] = rng.IntN(50)
		}
		want := slices.Sorted(slices.Values(xs))
		for _, k := range []int{-1, 0, 1, 2, n / 2, n - 1, n, n + 1} {
			got, more := Smallest(slices.Clone(xs), k, cmp.Compare[int])
			w := want[:max(min(k, n), 0)]
			if !slices.Equal(got, w) && len(got)+len(w) > 0 || more != (max(k, 0) < n) {
				t.Errorf("n=%d k=%d: %v more=%v, want %v more=%v", n, k, got, more, w, k < n)
			}
		}
	}
}
