package state

import (
	"bytes"
	"testing"
	"time"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestChanged(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	ch := h.f.Changed()
	if closed(ch) || h.f.Changed() != ch {
		t.Fatal("Changed closed or replaced its channel without a change")
	}
	h.must(CmdJobSubmit, MakeJob("research", 1).Obj())
	if !closed(ch) {
		t.Fatal("an applied command did not close the channel")
	}
	ch = h.f.Changed()
	if closed(ch) {
		t.Fatal("the next channel is closed already")
	}
	h.apply(CmdJobCancel, JobCancel{ID: 99}) // refused: readers look again and find nothing new
	if !closed(ch) {
		t.Fatal("a refused command did not close the channel")
	}
	ch = h.f.Changed()
	if err := New().Restore(nopCloser{bytes.NewReader(h.snapshot())}); err != nil {
		t.Fatal(err)
	}
	if closed(ch) {
		t.Fatal("restoring another FSM woke this one's readers")
	}
	if err := h.f.Restore(nopCloser{bytes.NewReader(h.snapshot())}); err != nil {
		t.Fatal(err)
	}
	if !closed(ch) {
		t.Fatal("a restore did not close the channel")
	}
}

// TestChangedMissesNothing: a reader that takes the channel before it reads
// sees the last of many concurrent changes (run with -race).
func TestChangedMissesNothing(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 16)
	const n = 200
	done := make(chan int)
	go func() {
		for {
			ch := h.f.Changed()
			if got := len(h.f.Jobs(JobFilter{})); got == n {
				done <- got
				return
			}
			<-ch
		}
	}()
	for i := 0; i < n; i++ {
		h.must(CmdJobSubmit, MakeJob("research", 1).Obj())
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader missed the last change")
	}
}
