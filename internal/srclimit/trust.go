package srclimit

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"
)

// Trusted is the set of sources a listener never limits: the members'
// addresses and the operator's TrustedSources. The zero value trusts no
// one. It is safe for concurrent use: Set replaces the set whole, so a
// reader never sees half of one.
type Trusted struct {
	p atomic.Pointer[[]netip.Prefix]
}

// Contains says whether a is trusted (an IPv4-mapped address as IPv4).
func (t *Trusted) Contains(a netip.Addr) bool {
	p := t.p.Load()
	if p == nil {
		return false
	}
	a = a.Unmap()
	for _, q := range *p {
		if q.Contains(a) {
			return true
		}
	}
	return false
}

// Set trusts exactly ps (a copy).
func (t *Trusted) Set(ps []netip.Prefix) {
	c := slices.Clone(ps)
	t.p.Store(&c)
}

// resolveTimeout bounds one name's lookup: a dead resolver must not hold
// a member's trust back for long.
const resolveTimeout = 2 * time.Second

// Resolve returns base and the hosts' addresses as one-address prefixes:
// an IP literal as it is, a name looked up. A name that does not resolve
// is told to failed and left out (its member is limited as any source
// until a later Resolve finds it).
func Resolve(ctx context.Context, base []netip.Prefix, hosts []string, failed func(host string, err error)) []netip.Prefix {
	out := slices.Clone(base)
	for _, h := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		addrs, err := net.DefaultResolver.LookupNetIP(lctx, "ip", h)
		cancel()
		if err != nil {
			failed(h, err)
			continue
		}
		for _, a := range addrs {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}
