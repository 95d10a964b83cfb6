package srclimit_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/srclimit"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":                  "192.0.2.7/32",
		"::ffff:192.0.2.7":           "192.0.2.7/32",
		"2001:db8:1:2:3:4:5:6":       "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1":       "2001:db8:1:2::/64",
		"fe80::1%eth0":               "fe80::/64",
		"2001:db8:1:3:0:0:0:1":       "2001:db8:1:3::/64",
		"::1":                        "::/64",
		"127.0.0.2":                  "127.0.0.2/32",
		"2001:db8:ffff:ffff:ffff::1": "2001:db8:ffff:ffff::/64",
	} {
		if got := srclimit.Key(addr(in)).String(); got != want {
			t.Errorf("Key(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestRate: a source opens Burst connections at once, then Rate a second;
// another source has its own bucket.
func TestRate(t *testing.T) {
	clk := tstime.NewFake(t0)
	tab := srclimit.New(srclimit.Limits{Rate: 2, Burst: 3}, clk)
	a, b := addr("192.0.2.1"), addr("192.0.2.2")
	for i := range 3 {
		if _, why := tab.Open(a); why != "" {
			t.Fatalf("connection %d of the burst refused: %s", i, why)
		}
	}
	if _, why := tab.Open(a); why != srclimit.ReasonRate {
		t.Fatalf("past the burst: reason %q, want %q", why, srclimit.ReasonRate)
	}
	if _, why := tab.Open(b); why != "" {
		t.Fatalf("another source refused: %s", why)
	}
	clk.Advance(500 * time.Millisecond) // one token at 2/s
	if _, why := tab.Open(a); why != "" {
		t.Fatalf("after refill: %s", why)
	}
	if _, why := tab.Open(a); why != srclimit.ReasonRate {
		t.Fatalf("second after one refill: %q", why)
	}
	// An IPv6 host's /64 is one source.
	c1, c2 := addr("2001:db8::1"), addr("2001:db8::2")
	for range 3 {
		tab.Open(c1)
	}
	if _, why := tab.Open(c2); why != srclimit.ReasonRate {
		t.Fatalf("same /64: %q, want rate", why)
	}
}

// TestPerSource: open connections are capped per source; closing one
// makes room, and closing twice counts once.
func TestPerSource(t *testing.T) {
	tab := srclimit.New(srclimit.Limits{PerSource: 2}, tstime.NewFake(t0))
	a := addr("192.0.2.1")
	r1, _ := tab.Open(a)
	if _, why := tab.Open(a); why != "" {
		t.Fatal(why)
	}
	if _, why := tab.Open(a); why != srclimit.ReasonPerSource {
		t.Fatalf("third: %q, want per_source", why)
	}
	r1()
	r1()
	if _, why := tab.Open(a); why != "" {
		t.Fatalf("after a close: %q", why)
	}
	if _, why := tab.Open(a); why != srclimit.ReasonPerSource {
		t.Fatalf("a double release counted twice: %q", why)
	}
}

// TestZeroIsOff: zero limits admit everything.
func TestZeroIsOff(t *testing.T) {
	tab := srclimit.New(srclimit.Limits{}, tstime.NewFake(t0))
	for range 1000 {
		if _, why := tab.Open(addr("192.0.2.1")); why != "" {
			t.Fatal(why)
		}
		tab.AuthFailed(addr("192.0.2.1"))
	}
	if _, refused := tab.AuthRefused(addr("192.0.2.1")); refused {
		t.Fatal("auth refused with no limit")
	}
}

// TestBounded: a client cycling through addresses does not grow the table
// past MaxSources; sources with connections open are kept.
func TestBounded(t *testing.T) {
	tab := srclimit.New(srclimit.Limits{Rate: 1, Burst: 1, PerSource: 1, MaxSources: 100}, tstime.NewFake(t0))
	held := addr("198.51.100.1")
	if _, why := tab.Open(held); why != "" {
		t.Fatal(why)
	}
	for i := range 10000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		if r, why := tab.Open(a); why == "" {
			r()
		}
	}
	if n := tab.Len(); n > 100 {
		t.Fatalf("table holds %d sources, bound 100", n)
	}
	// The held source was not forgotten: still at its cap.
	if _, why := tab.Open(held); why != srclimit.ReasonPerSource {
		t.Fatalf("a source with a connection open was forgotten: %q", why)
	}
}

// TestAuthWindow: after AuthFailures failures in the window the source is
// refused until the window ends, with the time left; another source is not.
func TestAuthWindow(t *testing.T) {
	clk := tstime.NewFake(t0)
	tab := srclimit.New(srclimit.Limits{AuthFailures: 3, AuthWindow: time.Minute}, clk)
	a, b := addr("192.0.2.1"), addr("192.0.2.2")
	for i := range 3 {
		if _, refused := tab.AuthRefused(a); refused {
			t.Fatalf("refused after %d failures", i)
		}
		tab.AuthFailed(a)
		clk.Advance(time.Second)
	}
	ra, refused := tab.AuthRefused(a)
	if !refused || ra != 57*time.Second {
		t.Fatalf("after 3 failures: refused %v, retry after %s; want true, 57s", refused, ra)
	}
	if _, refused := tab.AuthRefused(b); refused {
		t.Fatal("another source refused")
	}
	clk.Advance(57 * time.Second)
	if _, refused := tab.AuthRefused(a); refused {
		t.Fatal("still refused after the window")
	}
	// A new window: failures spread over more than a window never refuse.
	for range 10 {
		tab.AuthFailed(a)
		clk.Advance(30 * time.Second)
		tab.AuthFailed(a)
		clk.Advance(31 * time.Second)
		if _, refused := tab.AuthRefused(a); refused {
			t.Fatal("two failures a window refused")
		}
	}
}

// TestHandshakes: a source's handshakes in progress are capped; an ended
// one frees its slot, once.
func TestHandshakes(t *testing.T) {
	tab := srclimit.New(srclimit.Limits{Handshakes: 2}, tstime.NewFake(t0))
	a := addr("192.0.2.1")
	e1, _ := tab.BeginHandshake(a)
	tab.BeginHandshake(a)
	if _, why := tab.BeginHandshake(a); why != srclimit.ReasonHandshakes {
		t.Fatalf("third handshake: %q", why)
	}
	if _, why := tab.BeginHandshake(addr("192.0.2.2")); why != "" {
		t.Fatalf("another source: %q", why)
	}
	e1()
	e1()
	if _, why := tab.BeginHandshake(a); why != "" {
		t.Fatalf("after one ended: %q", why)
	}
	if _, why := tab.BeginHandshake(a); why != srclimit.ReasonHandshakes {
		t.Fatalf("an end counted twice: %q", why)
	}
}

// TestBucket: Burst at once, then Rate a second; 0 admits everything.
func TestBucket(t *testing.T) {
	clk := tstime.NewFake(t0)
	b := srclimit.NewBucket(10, 5, clk)
	n := 0
	for b.Allow() {
		n++
	}
	if n != 5 {
		t.Fatalf("burst: %d, want 5", n)
	}
	clk.Advance(time.Second)
	for n = 0; b.Allow(); n++ {
	}
	if n != 5 { // refilled to the burst, not 10
		t.Fatalf("after 1s: %d, want 5 (the burst)", n)
	}
	clk.Advance(200 * time.Millisecond)
	for n = 0; b.Allow(); n++ {
	}
	if n != 2 {
		t.Fatalf("after 200ms: %d, want 2", n)
	}
	off := srclimit.NewBucket(0, 0, clk)
	for range 100 {
		if !off.Allow() {
			t.Fatal("rate 0 refused")
		}
	}
}

// BenchmarkOpenRefused is the table's part of refusing a connection from a
// source over its rate (the accept and the reset are the kernel's).
func BenchmarkOpenRefused(b *testing.B) {
	tab := srclimit.New(srclimit.Limits{Rate: 1, Burst: 1}, tstime.Std{})
	a := addr("192.0.2.1")
	tab.Open(a)
	for b.Loop() {
		if _, why := tab.Open(a); why == "" {
			b.Fatal("admitted")
		}
	}
}

// BenchmarkOpenManySources admits and releases connections from 65,536
// sources in turn, past the table's bound (every Open forgets one).
func BenchmarkOpenManySources(b *testing.B) {
	tab := srclimit.New(srclimit.Limits{Rate: 50, Burst: 200, PerSource: 512, MaxSources: 4096}, tstime.Std{})
	i := 0
	for b.Loop() {
		a := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		i = (i + 1) & 0xffff
		r, why := tab.Open(a)
		if why != "" {
			b.Fatal(why)
		}
		r()
	}
}
