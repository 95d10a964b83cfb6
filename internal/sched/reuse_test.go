package sched

import "testing"

// TestKeptBuffersGrowAhead: a queue a few jobs longer every cycle (a
// stream of submits) gets its kept buffers anew once in many cycles, not
// every cycle (as it did when they were made to the exact length), and
// each is what its contract says: reuse empty and zeroed all zero.
func TestKeptBuffersGrowAhead(t *testing.T) {
	for _, c := range []struct {
		name string
		use  func(buf []*int, n int) []*int
	}{
		{"reuse", func(buf []*int, n int) []*int {
			buf = reuse(buf, n)
			if len(buf) != 0 {
				t.Fatalf("reuse(_, %d) has %d entries, want none", n, len(buf))
			}
			for range n {
				buf = append(buf, new(int))
			}
			return buf
		}},
		{"zeroed", func(buf []*int, n int) []*int {
			buf = zeroed(buf, n)
			if len(buf) != n {
				t.Fatalf("zeroed(_, %d) has %d entries", n, len(buf))
			}
			for i, p := range buf {
				if p != nil {
					t.Fatalf("zeroed(_, %d)[%d] is not zero", n, i)
				}
				buf[i] = new(int)
			}
			return buf
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf []*int
			made := 0
			for n := 10000; n < 10500; n += 5 { // 100 cycles, 5 submits each
				before := cap(buf)
				buf = c.use(buf, n)
				if cap(buf) != before {
					made++
				}
			}
			if made > 2 {
				t.Errorf("the buffer was made %d times over 100 cycles growing by 5 from 10,000, want at most 2", made)
			}
		})
	}
}
