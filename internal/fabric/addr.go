package fabric

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strings"
)

// Gateway subnet sizes of a vlan-aware link. A /27 (30 hosts: the
// gateway, the server and room for a few more addresses of the server)
// rather than a /24, so the default pool holds a subnet for every link of
// a 100,000-GPU fabric; RFC 1918 space holds no /24 per link at that size
// (100,000 /24s are 25.6 million addresses, 10/8 has 16.8 million).
const (
	irbBits4 = 27
	irbBits6 = 64
)

// IRBSubnets gives a vlan-aware link its gateway subnets, deterministically
// and without a pool: the link's number n is its offset in its fabric's link
// pool counted in links ((link address - pool address) / 2), and the link
// gets the n-th /27 of irb4 and the n-th /64 of irb6. The anycast gateway is
// the first host address (.1, ::1) and the server the second (.2, ::2).
// The default pools hold 131,072 links (16,384 servers of 8 rails).
//
// Why derive instead of allocate: link addresses are already stable (they
// belong to the cable, see topology.Normalize), so the gateway subnets are
// too. A link moving between tenants keeps its subnets, and a gateway is the
// same on every leaf that could ever serve the link.
//
// A family is skipped (invalid prefix) when the link has no address of it or
// the fabric has no pool of it; an error says which link does not fit.
func IRBSubnets(linkPool4, link4, irb4, linkPool6, link6, irb6 netip.Prefix) (gw4, gw6 netip.Prefix, err error) {
	if link4.IsValid() && linkPool4.IsValid() && irb4.IsValid() {
		s, err := nthSubnet(linkPool4, link4, irb4, irbBits4)
		if err != nil {
			return gw4, gw6, err
		}
		gw4 = netip.PrefixFrom(s.Addr().Next(), irbBits4)
	}
	if link6.IsValid() && linkPool6.IsValid() && irb6.IsValid() {
		s, err := nthSubnet(linkPool6, link6, irb6, irbBits6)
		if err != nil {
			return gw4, gw6, err
		}
		gw6 = netip.PrefixFrom(s.Addr().Next(), irbBits6)
	}
	return gw4, gw6, nil
}

// nthSubnet returns the subnet of size bits in irb whose index is link's
// offset in pool counted in two-address links.
func nthSubnet(pool, link, irb netip.Prefix, bits int) (netip.Prefix, error) {
	if !pool.Contains(link.Addr()) {
		return netip.Prefix{}, fmt.Errorf("link %s is outside its fabric's link pool %s, so it has no link number for a gateway subnet", link, pool)
	}
	if irb.Bits() > bits {
		return netip.Prefix{}, fmt.Errorf("gateway pool %s is smaller than one /%d", irb, bits)
	}
	off := toU128(link.Addr()).sub(toU128(pool.Masked().Addr())).shr1()
	room := uint(bits - irb.Bits())
	if room < 64 && (off.hi != 0 || off.lo >= 1<<room) {
		return netip.Prefix{}, fmt.Errorf("link %s is link number %d of pool %s, but gateway pool %s holds only %d /%d subnets: use a larger gateway pool",
			link, off.lo, pool, irb, uint64(1)<<room, bits)
	}
	total := irb.Addr().BitLen()
	a := toU128(irb.Masked().Addr()).add(off.shl(uint(total - bits)))
	return netip.PrefixFrom(a.addr(irb.Addr().Is4()), bits), nil
}

// u128 is a 128-bit unsigned integer, enough for IPv6 address arithmetic.
type u128 struct{ hi, lo uint64 }

func toU128(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{lo: uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return u128{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
}

func (x u128) addr(v4 bool) netip.Addr {
	if v4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(x.lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], x.hi)
	binary.BigEndian.PutUint64(b[8:], x.lo)
	return netip.AddrFrom16(b)
}

func (x u128) sub(y u128) u128 {
	lo, borrow := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, borrow)
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, carry := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, carry)
	return u128{hi, lo}
}

func (x u128) shr1() u128 { return u128{x.hi >> 1, x.lo>>1 | x.hi<<63} }

func (x u128) shl(n uint) u128 {
	switch {
	case n == 0:
		return x
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{hi: x.lo << (n - 64)}
	}
	return u128{hi: x.hi<<n | x.lo>>(64-n), lo: x.lo << n}
}

// parseMAC accepts a unicast MAC as six colon-separated hex pairs and
// returns it lower-case. (The net package is off limits to pure cores.)
func parseMAC(s string) (string, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return "", fmt.Errorf("MAC %q is not six colon-separated hex pairs such as %s", s, DefaultAnycastMAC)
	}
	var first byte
	for i, p := range parts {
		if len(p) != 2 {
			return "", fmt.Errorf("MAC %q is not six colon-separated hex pairs such as %s", s, DefaultAnycastMAC)
		}
		var v byte
		for _, c := range []byte(strings.ToLower(p)) {
			switch {
			case c >= '0' && c <= '9':
				v = v<<4 | (c - '0')
			case c >= 'a' && c <= 'f':
				v = v<<4 | (c - 'a' + 10)
			default:
				return "", fmt.Errorf("MAC %q has a non-hex digit", s)
			}
		}
		if i == 0 {
			first = v
		}
	}
	if first&1 != 0 {
		return "", fmt.Errorf("MAC %q is a multicast address; a gateway MAC must be unicast", s)
	}
	return strings.ToLower(s), nil
}

// Summarize returns the smallest list of prefixes covering exactly the
// addresses of ps (no more: a summary that also covered a server's link
// would cut it off), IPv4 first, sorted.
func Summarize(ps []netip.Prefix) []netip.Prefix {
	in := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if p.IsValid() {
			in = append(in, p.Masked())
		}
	}
	sortPrefixes(in)
	in = slices.Compact(in)
	// Drop prefixes inside an earlier one (sorted by address, then length).
	out := in[:0]
	for _, p := range in {
		if n := len(out); n > 0 && out[n-1].Bits() <= p.Bits() && out[n-1].Contains(p.Addr()) {
			continue
		}
		out = append(out, p)
	}
	// Merge sibling halves until nothing merges: two /n that make one /n-1.
	for merged := true; merged; {
		merged = false
		next := out[:0]
		for i := 0; i < len(out); i++ {
			p := out[i]
			if i+1 < len(out) && p.Bits() > 0 && p.Bits() == out[i+1].Bits() {
				parent, _ := p.Addr().Prefix(p.Bits() - 1)
				if parent.Addr() == p.Addr() && parent.Contains(out[i+1].Addr()) {
					next = append(next, parent)
					i++
					merged = true
					continue
				}
			}
			next = append(next, p)
		}
		out = next
	}
	return slices.Clip(out)
}
