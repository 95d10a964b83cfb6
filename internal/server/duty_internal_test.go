package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// TestDutyGap: after a cycle of d the next waits d x (1/duty - 1), never
// more than the interval; a duty of 1 or an instant cycle waits nothing.
func TestDutyGap(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		duty float64
		want time.Duration
	}{
		{400 * time.Millisecond, 0.5, 400 * time.Millisecond},
		{400 * time.Millisecond, 0.25, 1200 * time.Millisecond},
		{400 * time.Millisecond, 0.8, 100 * time.Millisecond},
		{400 * time.Millisecond, 1, 0},
		{0, 0.5, 0},
		{time.Second, 0.1, 2 * time.Second}, // 9s, capped at the interval
	} {
		if got := dutyGap(tc.d, tc.duty, 2*time.Second); got != tc.want {
			t.Errorf("dutyGap(%v, %g) = %v, want %v", tc.d, tc.duty, got, tc.want)
		}
	}
}

// TestDutyHoldsAKickAfterASlowCycle: a kick right after a 400ms cycle at
// duty 0.5 waits 400ms of the server's clock; kicks, ticks and a due
// deadline meanwhile are taken, not run as cycles of their own.
func TestDutyHoldsAKickAfterASlowCycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clk := tstime.NewFake(time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC))
	var g dutyGate
	start := clk.Now()
	clk.Advance(400 * time.Millisecond) // the cycle
	g.ran(start, clk.Now(), 0.5, 2*time.Second)

	kick := make(chan struct{}, 1)
	tick, due := make(chan time.Time), make(chan time.Time)
	kick <- struct{}{}
	done := make(chan bool, 1)
	go func() { done <- g.hold(ctx, clk, kick, tick, due) }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(399 * time.Millisecond)
	for _, ch := range []chan time.Time{tick, due} {
		select {
		case ch <- clk.Now():
		case <-ctx.Done():
			t.Fatal("the hold did not take a tick or deadline")
		}
	}
	select {
	case <-done:
		t.Fatalf("the cycle began %v after the slow one, before the 400ms gap", 399*time.Millisecond)
	default:
	}
	select { // room in the kick channel again: the hold took the first
	case kick <- struct{}{}:
	case <-ctx.Done():
		t.Fatal("the kick during the hold was not taken")
	}
	clk.Advance(time.Millisecond)
	if ok := <-done; !ok {
		t.Fatal("hold gave up without ctx ending")
	}

	// Past the gap, or after an instant cycle, nothing waits (no timer).
	g.ran(clk.Now(), clk.Now(), 0.5, 2*time.Second)
	if !g.hold(ctx, clk, kick, tick, due) || clk.Timers() != 0 {
		t.Fatal("an instant cycle held the next")
	}
}

// TestCheckDuty: a duty outside (0, 1] is refused naming the flag.
func TestCheckDuty(t *testing.T) {
	for _, d := range []float64{0, 0.01, 0.5, 1} {
		if err := checkDuty(d); err != nil {
			t.Errorf("checkDuty(%g): %v", d, err)
		}
	}
	for _, d := range []float64{-0.5, 1.5} {
		err := checkDuty(d)
		var e *domain.Error
		if !errors.As(err, &e) || e.Code != domain.CodeInvalidArgument || e.Field != "scheduler-duty" {
			t.Errorf("checkDuty(%g) = %v, want an invalid-argument error", d, err)
		}
	}
}
