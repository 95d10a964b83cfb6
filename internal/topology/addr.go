package topology

import (
	"fmt"
	"net/netip"
)

// Link prefix lengths: a server link or an uplink is a point-to-point /31
// (RFC 3021) or /127 (RFC 6164); the leaf takes the first address.
const (
	linkBits4 = 31
	linkBits6 = 127
)

// parseLink parses a point-to-point link prefix of one family and says why
// it is not one.
func parseLink(s string, v6 bool) (netip.Prefix, error) {
	bits, fam := linkBits4, "IPv4"
	if v6 {
		bits, fam = linkBits6, "IPv6"
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a prefix such as %s", exampleLink(v6))
	}
	a := p.Addr()
	if a.Is4In6() || a.Is4() == v6 || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("not an %s prefix", fam)
	}
	if p.Bits() != bits {
		return netip.Prefix{}, fmt.Errorf("a /%d, not a /%d", bits, p.Bits())
	}
	if p.Masked() != p {
		// The leaf takes the first address, the server the second: a prefix
		// written with the server's address would leave that ambiguous.
		return netip.Prefix{}, fmt.Errorf("written with its first address (%s)", p.Masked())
	}
	return p, nil
}

func exampleLink(v6 bool) string {
	if v6 {
		return "fd00:0:0:1::/127"
	}
	return "10.0.0.0/31"
}

func examplePool(v6 bool) string {
	if v6 {
		return "fd00:0:0:1::/64"
	}
	return "10.0.0.0/16"
}

// parsePool parses a link pool: a prefix of one family, at most a /31 (/127)
// so it holds at least one link.
func parsePool(s string, v6 bool) (netip.Prefix, error) {
	bits, fam := linkBits4, "IPv4"
	if v6 {
		bits, fam = linkBits6, "IPv6"
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a prefix such as %s", examplePool(v6))
	}
	a := p.Addr()
	if a.Is4In6() || a.Is4() == v6 || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("not an %s prefix", fam)
	}
	if p.Bits() > bits {
		return netip.Prefix{}, fmt.Errorf("a /%d, too small to hold one /%d link", p.Bits(), bits)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("not written with its first address (%s)", p.Masked())
	}
	return p, nil
}

// parseLoopback parses a switch loopback: a unicast IPv4 address.
func parseLoopback(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("not an IPv4 address such as 10.254.0.1")
	}
	if a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return netip.Addr{}, fmt.Errorf("not a unicast address")
	}
	return a, nil
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// addrSet answers "is this candidate link prefix free?" in O(1) for the
// common case: everything already used is keyed by the link-sized block that
// holds it; the rare wider prefixes (a bad cable, an odd loopback) are
// checked one by one.
type addrSet struct {
	blocks map[netip.Prefix]struct{}
	wide   []netip.Prefix
}

func newAddrSet() *addrSet { return &addrSet{blocks: map[netip.Prefix]struct{}{}} }

func linkBits(a netip.Addr) int {
	if a.Is4() {
		return linkBits4
	}
	return linkBits6
}

func (s *addrSet) add(p netip.Prefix) {
	lb := linkBits(p.Addr())
	if p.Bits() >= lb {
		s.blocks[netip.PrefixFrom(p.Addr(), lb).Masked()] = struct{}{}
		return
	}
	s.wide = append(s.wide, p.Masked())
}

// used reports whether a link-sized, masked candidate overlaps anything in s.
func (s *addrSet) used(cand netip.Prefix) bool {
	if _, ok := s.blocks[cand]; ok {
		return true
	}
	for _, w := range s.wide {
		if w.Overlaps(cand) {
			return true
		}
	}
	return false
}
