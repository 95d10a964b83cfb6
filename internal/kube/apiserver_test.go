package kube_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/kube"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// TestAPIRetryBounded: (no server) the waits between probes of a
// kube-apiserver that does not answer start at 250ms, double, never
// exceed 2s however long it is down, and are jittered down by up to half.
func TestAPIRetryBounded(t *testing.T) {
	bound := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
	for failed := 1; failed <= 50; failed++ {
		want := bound[min(failed, len(bound))-1]
		for _, r := range []float64{0, 0.5, 0.999999} {
			d := kube.APIRetry(failed, r)
			if d > want || d < want/2 {
				t.Fatalf("after %d failed probes, r %g: wait %s, want within [%s, %s]", failed, r, d, want/2, want)
			}
		}
		if d := kube.APIRetry(failed, 0); d != want {
			t.Fatalf("after %d failed probes, no jitter: %s, want %s", failed, d, want)
		}
	}
}

// TestFollowAPIServer: (fake clock, scripted probe) while kube-apiserver
// answers it is asked once an interval; while it does not, again within
// 2s however long the outage (client-go's reflectors: up to 60s); when it
// answers again the bridge is told once (it starts new informers).
func TestFollowAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := tstime.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	b := kube.New(kube.Config{Clock: clock, Interval: 5 * time.Second, Logger: logger()})
	var up atomic.Bool
	up.Store(true)
	probed := make(chan bool, 1)
	probe := func(context.Context) error {
		ok := up.Load()
		probed <- ok
		if !ok {
			return errors.New("connection refused")
		}
		return nil
	}
	back := make(chan struct{}, 1)
	go kube.FollowAPIServer(ctx, b, probe, back)
	// step advances the clock by d once the follower waits, and returns
	// whether it probed (and what it found).
	step := func(d time.Duration) {
		t.Helper()
		if err := clock.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clock.Advance(d)
	}
	next := func(want bool) {
		t.Helper()
		select {
		case got := <-probed:
			if got != want {
				t.Fatalf("probe found the server up=%v, want %v", got, want)
			}
		case <-ctx.Done():
			t.Fatal("no probe")
		}
	}
	step(5 * time.Second)
	next(true)
	up.Store(false)
	step(5 * time.Second)
	next(false)
	for range 40 { // 80s of outage at most: each probe comes within 2s
		step(2 * time.Second)
		next(false)
	}
	select {
	case <-back:
		t.Fatal("told the server is back while it is down")
	default:
	}
	up.Store(true)
	step(2 * time.Second)
	next(true)
	select {
	case <-back:
	case <-ctx.Done():
		t.Fatal("not told the server is back")
	}
	step(5 * time.Second) // healthy again: once an interval, and no news
	next(true)
	select {
	case <-back:
		t.Fatal("told twice")
	default:
	}
}
