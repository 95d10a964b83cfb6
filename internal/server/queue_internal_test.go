package server

import (
	"maps"
	"reflect"
	"sync"
	"testing"
	"time"
)

// TestQueueOrderRanksOnFirstRead: a cycle stores its order as the plan
// made it; the ranks GET /v1/queue sorts by are built by the first read,
// once (concurrent readers get the one map), each job at its index.
func TestQueueOrderRanksOnFirstRead(t *testing.T) {
	o := newQueueOrder(time.Unix(0, 0), []uint64{7, 3, 9})
	if o.rank != nil {
		t.Fatalf("ranks built before any read: %v", o.rank)
	}
	got := make([]map[uint64]int, 4)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i] = o.ranks() })
	}
	wg.Wait()
	if want := map[uint64]int{7: 0, 3: 1, 9: 2}; !maps.Equal(got[0], want) {
		t.Fatalf("ranks %v, want %v", got[0], want)
	}
	for _, m := range got[1:] {
		if reflect.ValueOf(m).UnsafePointer() != reflect.ValueOf(got[0]).UnsafePointer() {
			t.Fatal("concurrent readers built the ranks more than once")
		}
	}
}
