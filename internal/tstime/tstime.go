// Package tstime is the clock the server's loops wait on, as Tailscale's
// tstime is: Now, timers and tickers behind one interface, so tests step
// time with Fake instead of sleeping and polling.
package tstime

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Clock tells the time and waits on it.
type Clock interface {
	Now() time.Time
	// NewTimer fires once, d from now.
	NewTimer(d time.Duration) (Timer, <-chan time.Time)
	// NewTicker fires every d.
	NewTicker(d time.Duration) (Ticker, <-chan time.Time)
	// AfterFunc calls f in its own goroutine d from now.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending timer.
type Timer interface {
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
	// Reset makes the timer fire d from now; it reports whether it was
	// pending.
	Reset(d time.Duration) bool
}

// Ticker is a running ticker.
type Ticker interface {
	Stop()
	Reset(d time.Duration)
}

// Std is the system clock.
type Std struct{}

func (Std) Now() time.Time { return time.Now() }

func (Std) NewTimer(d time.Duration) (Timer, <-chan time.Time) {
	t := time.NewTimer(d)
	return t, t.C
}

func (Std) NewTicker(d time.Duration) (Ticker, <-chan time.Time) {
	t := time.NewTicker(d)
	return t, t.C
}

func (Std) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a clock that moves only when a test steps it. A tick is handed
// over, not dropped: Advance returns once the waiting loop has taken every
// tick that fell due (or stopped its timer), so a test that advances past
// one more tick knows the loop finished its work for the previous one.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	armed  chan struct{} // closed and replaced when a timer is armed
}

// NewFake starts a fake clock at start.
func NewFake(start time.Time) *Fake { return &Fake{now: start, armed: make(chan struct{})} }

type fakeTimer struct {
	c       *Fake
	when    time.Time
	period  time.Duration // 0 for a one-shot timer
	ch      chan time.Time
	f       func()
	stopped chan struct{} // closed by Stop: a pending hand-over gives up
	active  bool
}

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Timers reports how many timers and tickers are pending: a test waits for
// a loop to arm its timer before it steps time.
func (c *Fake) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// BlockUntil waits until at least n timers are pending. A loop that arms a
// new timer after each tick has armed it again once this returns, so the
// next Advance fires it; Advance alone returns as soon as the tick is
// taken.
func (c *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		have, armed := len(c.timers), c.armed
		c.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d timers pending, want %d: %w", have, n, ctx.Err())
		case <-armed:
		}
	}
}

// arm adds a timer; c.mu is held.
func (c *Fake) arm(t *fakeTimer) {
	c.timers = append(c.timers, t)
	close(c.armed)
	c.armed = make(chan struct{})
}

func (c *Fake) add(d, period time.Duration, f func()) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, when: c.now.Add(d), period: period, f: f, stopped: make(chan struct{}), active: true}
	if f == nil {
		t.ch = make(chan time.Time)
	}
	c.arm(t)
	return t
}

func (c *Fake) NewTimer(d time.Duration) (Timer, <-chan time.Time) {
	t := c.add(d, 0, nil)
	return t, t.ch
}

func (c *Fake) NewTicker(d time.Duration) (Ticker, <-chan time.Time) {
	if d <= 0 {
		panic("tstime: non-positive ticker interval")
	}
	t := c.add(d, d, nil)
	return (*fakeTicker)(t), t.ch
}

func (c *Fake) AfterFunc(d time.Duration, f func()) Timer { return c.add(d, 0, f) }

// Advance moves the clock d forward, firing what falls due in time order.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.when.After(end) && (next == nil || t.when.Before(next.when)) {
				next = t
			}
		}
		// Never backwards: another Advance (a test's goroutine) may have
		// moved the clock past end meanwhile.
		if next == nil {
			if end.After(c.now) {
				c.now = end
			}
			c.mu.Unlock()
			return
		}
		at := next.when
		if at.After(c.now) {
			c.now = at
		}
		if next.period > 0 {
			next.when = at.Add(next.period)
		} else {
			c.remove(next)
		}
		f, ch, stopped := next.f, next.ch, next.stopped
		c.mu.Unlock()
		if f != nil {
			go f()
			continue
		}
		select {
		case ch <- at:
		case <-stopped:
		}
	}
}

// remove drops a timer; c.mu is held.
func (c *Fake) remove(t *fakeTimer) bool {
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.active {
		t.active = false
		close(t.stopped)
	}
	return t.c.remove(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.c.remove(t)
	t.when = t.c.now.Add(d)
	if !t.active {
		t.active, t.stopped = true, make(chan struct{})
	}
	t.c.arm(t)
	return was
}

type fakeTicker fakeTimer

func (t *fakeTicker) Stop() { (*fakeTimer)(t).Stop() }

func (t *fakeTicker) Reset(d time.Duration) {
	ft := (*fakeTimer)(t)
	ft.Reset(d)
	ft.c.mu.Lock()
	ft.period = d
	ft.c.mu.Unlock()
}
