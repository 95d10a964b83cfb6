package tstime

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

// TestFakeTickerHandsOverEveryTick: a loop on a fake ticker sees one tick
// per period stepped, at the fake time, and Advance returns only once the
// loop took them.
func TestFakeTickerHandsOverEveryTick(t *testing.T) {
	c := NewFake(t0)
	tk, ch := c.NewTicker(10 * time.Second)
	var got atomic.Int64
	var last atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case at := <-ch:
				last.Store(at)
				got.Add(1)
			}
		}
	}()
	c.Advance(25 * time.Second)
	c.Advance(10 * time.Second)
	if !c.Now().Equal(t0.Add(35 * time.Second)) {
		t.Fatalf("now %v", c.Now())
	}
	// Advance returned after the loop took the third tick; no fourth is due.
	cancel()
	<-done
	if n := got.Load(); n != 3 {
		t.Fatalf("%d ticks after 35s of 10s ticks, want 3", n)
	}
	if at := last.Load().(time.Time); !at.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("last tick at %v, want t0+30s", at)
	}
	// A stopped ticker never blocks Advance.
	c.Advance(time.Minute)
	if c.Timers() != 0 {
		t.Fatalf("%d timers pending after Stop", c.Timers())
	}
}

func TestFakeTimerStopResetAfterFunc(t *testing.T) {
	c := NewFake(t0)
	tm, ch := c.NewTimer(time.Second)
	if !tm.Stop() || tm.Stop() {
		t.Fatal("Stop of a pending timer must report true once")
	}
	c.Advance(2 * time.Second) // stopped: nothing to hand over, no block
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer reported it pending")
	}
	go c.Advance(time.Second)
	if at := <-ch; !at.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("fired at %v, want t0+3s", at)
	}
	fired := make(chan time.Time, 1)
	c.AfterFunc(time.Hour, func() { fired <- c.Now() })
	c.Advance(59 * time.Minute)
	select {
	case <-fired:
		t.Fatal("AfterFunc fired early")
	default:
	}
	c.Advance(time.Minute)
	if at := <-fired; !at.Equal(t0.Add(3*time.Second + time.Hour)) {
		t.Fatalf("AfterFunc at %v", at)
	}
}

func TestStdFires(t *testing.T) {
	var c Clock = Std{}
	_, ch := c.NewTimer(time.Millisecond)
	<-ch
	tk, tch := c.NewTicker(time.Millisecond)
	<-tch
	tk.Stop()
}

// TestBlockUntilStepsARearmingLoop: a loop that arms a new timer after
// each tick gets exactly one tick per step when the test waits for it to
// re-arm first.
func TestBlockUntilStepsARearmingLoop(t *testing.T) {
	c := NewFake(t0)
	ctx, cancel := context.WithCancel(context.Background())
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			tm, fire := c.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				tm.Stop()
				return
			case <-fire:
				got.Add(1)
			}
		}
	}()
	for range 5 {
		if err := c.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
	}
	if err := c.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := got.Load(); n != 5 {
		t.Fatalf("%d ticks in 5 steps, want 5", n)
	}
	cancel()
	<-done
	short, stop := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer stop()
	if err := c.BlockUntil(short, 1); err == nil {
		t.Fatal("BlockUntil returned with no timer pending")
	}
}
