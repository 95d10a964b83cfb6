package srclimit_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/srclimit"
)

// TestTrusted: the zero value trusts no one; Set trusts exactly its
// prefixes, an IPv4-mapped address as IPv4, and replaces the set whole.
func TestTrusted(t *testing.T) {
	var tr srclimit.Trusted
	if tr.Contains(addr("192.0.2.1")) {
		t.Fatal("the zero value trusts 192.0.2.1")
	}
	ps := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::1/128")}
	tr.Set(ps)
	ps[0] = netip.MustParsePrefix("198.51.100.0/24") // Set copied
	for a, want := range map[string]bool{
		"192.0.2.9": true, "::ffff:192.0.2.9": true, "192.0.3.1": false, "198.51.100.1": false,
		"2001:db8::1": true, "2001:db8::2": false,
	} {
		if got := tr.Contains(addr(a)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", a, got, want)
		}
	}
	tr.Set(nil)
	if tr.Contains(addr("192.0.2.9")) {
		t.Error("Set(nil) kept 192.0.2.9")
	}
}

// TestResolve: base first, IP literals as one-address prefixes (mapped
// ones as IPv4), names looked up; a name that cannot be looked up is told
// to failed and left out.
func TestResolve(t *testing.T) {
	base := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	var failed []string
	got := srclimit.Resolve(context.Background(), base, []string{"192.0.2.7", "::ffff:192.0.2.8", "2001:db8::5"},
		func(h string, err error) { failed = append(failed, h) })
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("192.0.2.8/32"), netip.MustParsePrefix("2001:db8::5/128")}
	if !slices.Equal(got, want) || failed != nil {
		t.Errorf("Resolve = %v (failed %v), want %v", got, failed, want)
	}

	// A lookup cut short by its context fails; the literals still count.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got = srclimit.Resolve(ctx, nil, []string{"member.example", "192.0.2.7"}, func(h string, err error) { failed = append(failed, h) })
	if !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix("192.0.2.7/32")}) || !slices.Equal(failed, []string{"member.example"}) {
		t.Errorf("Resolve, cancelled = %v (failed %v), want [192.0.2.7/32] (failed [member.example])", got, failed)
	}
}
