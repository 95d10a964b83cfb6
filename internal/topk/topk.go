// Package topk keeps the k smallest of a stream of values: a page of a list
// the state does not keep in the page's order (the queue by the
// scheduler's ranks, usage rows by key) without holding or sorting the
// whole list (issue 18).
package topk

import "slices"

// Keeper keeps the k smallest values pushed, by cmp.
type Keeper[T any] struct {
	k    int
	cmp  func(a, b T) int
	h    []T // a max-heap once it holds k: h[0] is the largest kept
	more bool
}

// New keeps the k smallest (k < 1: none).
func New[T any](k int, cmp func(a, b T) int) *Keeper[T] {
	return &Keeper[T]{k: max(k, 0), cmp: cmp}
}

// Push offers x.
func (t *Keeper[T]) Push(x T) {
	if len(t.h) < t.k {
		t.h = append(t.h, x)
		t.up(len(t.h) - 1)
		return
	}
	t.more = true
	if t.k > 0 && t.cmp(x, t.h[0]) < 0 {
		t.h[0] = x
		t.down(0)
	}
}

// Sorted is the values kept, smallest first, and whether any pushed were
// left out. The Keeper is not to be used after.
func (t *Keeper[T]) Sorted() ([]T, bool) {
	slices.SortFunc(t.h, t.cmp)
	return t.h, t.more
}

func (t *Keeper[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if t.cmp(t.h[i], t.h[p]) <= 0 {
			return
		}
		t.h[i], t.h[p] = t.h[p], t.h[i]
		i = p
	}
}

func (t *Keeper[T]) down(i int) {
	n := len(t.h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && t.cmp(t.h[c+1], t.h[c]) > 0 {
			c++
		}
		if t.cmp(t.h[c], t.h[i]) <= 0 {
			return
		}
		t.h[i], t.h[c] = t.h[c], t.h[i]
		i = c
	}
}

// Smallest is the k smallest of xs, smallest first, and whether xs held
// more.
func Smallest[T any](xs []T, k int, cmp func(a, b T) int) ([]T, bool) {
	t := New(k, cmp)
	for _, x := range xs {
		t.Push(x)
	}
	return t.Sorted()
}
