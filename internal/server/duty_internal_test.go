package server

import (
	"context"
	"errors"
	"sync/atomic"
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
	g.ran(start, clk.Now(), 0.5, 0.5, false, 2*time.Second)

	kick := make(chan struct{}, 1)
	tick, due := make(chan time.Time), make(chan time.Time)
	kick <- struct{}{}
	done := make(chan bool, 1)
	go func() { done <- g.hold(ctx, clk, kick, nil, tick, due) }()
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
	g.ran(clk.Now(), clk.Now(), 0.5, 0.1, true, 2*time.Second)
	if !g.hold(ctx, clk, kick, nil, tick, due) || clk.Timers() != 0 {
		t.Fatal("an instant cycle held the next")
	}
}

// TestCheckDuty: a duty outside (0, 1] is refused naming the flag.
func TestCheckDuty(t *testing.T) {
	for _, d := range []float64{0, 0.01, 0.5, 1} {
		if err := checkDuty("scheduler-duty", d); err != nil {
			t.Errorf("checkDuty(%g): %v", d, err)
		}
	}
	for _, d := range []float64{-0.5, 1.5} {
		err := checkDuty("scheduler-duty", d)
		var e *domain.Error
		if !errors.As(err, &e) || e.Code != domain.CodeInvalidArgument || e.Field != "scheduler-duty" {
			t.Errorf("checkDuty(%g) = %v, want an invalid-argument error", d, err)
		}
	}
}

// TestQuietCycleHoldsSubmitsOnly: after a quiet cycle of 100ms (nothing
// placed, preempted or released) at duty 0.5 and quiet duty 0.1, a
// submit's kick waits the quiet gap (900ms); a kick for any other change,
// a due deadline, or such a change made before the hold began waits the
// regular gap (100ms), and one arriving after the regular gap has passed
// ends the hold at once. A cycle that was not quiet holds only the
// regular gap.
func TestQuietCycleHoldsSubmitsOnly(t *testing.T) {
	const cycle, regular, quietGap = 100 * time.Millisecond, 100 * time.Millisecond, 900 * time.Millisecond
	for _, tc := range []struct {
		name      string
		quiet     bool
		urgentNow bool          // a non-submit change before the hold
		event     string        // "submit", "change", "due" or "" (none)
		at        time.Duration // when the event arrives, after the cycle's end
		want      time.Duration // when the hold ends, after the cycle's end
	}{
		{name: "submit after a quiet cycle", quiet: true, event: "submit", at: 50 * time.Millisecond, want: quietGap},
		{name: "nothing after a quiet cycle", quiet: true, want: quietGap},
		{name: "another change after a quiet cycle", quiet: true, event: "change", at: 50 * time.Millisecond, want: regular},
		{name: "a due deadline after a quiet cycle", quiet: true, event: "due", at: 50 * time.Millisecond, want: regular},
		{name: "a change before the hold", quiet: true, urgentNow: true, want: regular},
		{name: "a change after the regular gap", quiet: true, event: "change", at: 300 * time.Millisecond, want: 300 * time.Millisecond},
		{name: "submit after a busy cycle", quiet: false, event: "submit", at: 50 * time.Millisecond, want: regular},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			clk := tstime.NewFake(time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC))
			var g dutyGate
			start := clk.Now()
			clk.Advance(cycle)
			end := clk.Now()
			g.ran(start, end, 0.5, 0.1, tc.quiet, 2*time.Second)
			var urgent atomic.Bool
			urgent.Store(tc.urgentNow)
			// Unbuffered: a send returns once the hold took it, and a tick
			// taken after an event means the hold has dealt with it.
			kick := make(chan struct{})
			tick, due := make(chan time.Time), make(chan time.Time)
			done := make(chan time.Duration, 1)
			go func() {
				if !g.hold(ctx, clk, kick, urgent.Load, tick, due) {
					t.Error("hold gave up without ctx ending")
				}
				done <- clk.Now().Sub(end)
			}()
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			step := func(to time.Duration) { clk.Advance(end.Add(to).Sub(clk.Now())) }
			// holding: the hold takes a tick (so it has not ended), or it
			// ended, which must be at want.
			holding := func() bool {
				select {
				case tick <- clk.Now():
					return true
				case got := <-done:
					if got != tc.want {
						t.Fatalf("the hold ended at +%v after the cycle, want +%v", got, tc.want)
					}
					return false
				}
			}
			if tc.event != "" {
				step(tc.at)
				switch tc.event {
				case "submit":
					kick <- struct{}{}
				case "change":
					urgent.Store(true)
					kick <- struct{}{}
				case "due":
					due <- clk.Now()
				}
				if !holding() {
					return
				}
			}
			step(tc.want - 10*time.Millisecond)
			if !holding() {
				t.Fatalf("the hold ended before +%v", tc.want)
			}
			step(tc.want)
			select {
			case got := <-done:
				if got != tc.want {
					t.Fatalf("the hold ended at +%v after the cycle, want +%v", got, tc.want)
				}
			case <-ctx.Done():
				t.Fatalf("the hold did not end at +%v", tc.want)
			}
		})
	}
}
