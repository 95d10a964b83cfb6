package topology

import (
	"fmt"
	"net/netip"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/platform"
)

// DefaultPortPrefix names switch ports when a switch does not say (SONiC and
// Cumulus style swp1..swpN).
const DefaultPortPrefix = platform.DefaultPortPrefix

// Normalize fills defaults in place so that what is stored, fingerprinted and
// compiled is explicit:
//
//   - apiVersion and kind;
//   - a switch's portPrefix ("swp") on the generic platform; with a known
//     platform, the model's spelling of vendor and model, the model's NOS
//     when nos is empty and its port count when portCount is 0;
//   - a server's nvlinkDomain (its own name) and gpuNuma (all node 0);
//   - the ipv4/ipv6 of every cable that has none, from its fabric's link pools.
//
// Generated link addresses are stable: a cable of the same (server, nic) as a
// cable of prev (the topology applied before, may be nil) keeps prev's
// address when it is still inside the pool and no explicitly given address
// now takes it. New cables get the lowest free /31 (/127) of the pool, after
// every explicit and reused address is set aside, so adding a server in the
// middle of a file renumbers nothing. A family without a pool is left empty.
//
// Normalize is deterministic (the state machine runs it) and idempotent. It
// returns an invalid_argument *domain.Error when a needed pool is malformed or
// exhausted; everything else is left for Validate to report.
func Normalize(t *domain.Topology, prev *domain.Topology) error {
	if t == nil {
		return domain.Invalid("", "no topology given")
	}
	if t.APIVersion == "" {
		t.APIVersion = APIVersion
	}
	if t.Kind == "" {
		t.Kind = Kind
	}
	for si := range t.Sites {
		for fi := range t.Sites[si].Fabrics {
			f := &t.Sites[si].Fabrics[fi]
			for i := range f.Spines {
				defaultSwitch(&f.Spines[i])
			}
			for i := range f.Leaves {
				defaultSwitch(&f.Leaves[i])
			}
			for i := range f.SuperSpines {
				defaultSwitch(&f.SuperSpines[i])
			}
			for i := range f.Servers {
				s := &f.Servers[i]
				if s.NVLinkDomain == "" {
					s.NVLinkDomain = s.Name
				}
				// Out-of-range counts are left for Validate rather than
				// allocating whatever a broken file asks for.
				if len(s.GPUNUMA) == 0 && s.GPUs >= 1 && s.GPUs <= maxGPUsPerServer {
					s.GPUNUMA = make([]int, s.GPUs)
				}
			}
		}
	}
	return assignLinkAddresses(t, prev)
}

func defaultSwitch(s *domain.Switch) {
	if s.Platform != nil {
		if m, ok := platform.Lookup(s.Platform.Vendor, s.Platform.Model); ok {
			// One spelling of a model, so the fingerprint does not depend
			// on the case an operator typed it in.
			s.Platform.Vendor, s.Platform.Model = m.Vendor, m.Name
			if s.NOS == "" {
				s.NOS = m.NOSes[0]
			}
			if !m.Generic() {
				if s.PortCount == 0 {
					s.PortCount = m.Ports()
				}
				return // named by the model: no prefix
			}
		}
	}
	if s.PortPrefix == "" {
		s.PortPrefix = DefaultPortPrefix
	}
}

type nicKey struct{ server, nic string }

// linkNeed is one cable address to fill from one pool.
type linkNeed struct {
	cable *domain.Cable
	path  string // JSON path of the field to fill
	v6    bool
	pool  *linkPool
}

type linkPool struct {
	prefix netip.Prefix
	path   string // JSON path of the pool, for errors
	next   netip.Addr
	left   int // needs not yet served, for the exhaustion message
}

func assignLinkAddresses(t *domain.Topology, prev *domain.Topology) error {
	// Everything given explicitly, anywhere in the topology, is taken: pools
	// of two fabrics may overlap and loopbacks may sit inside a pool.
	used := newAddrSet()
	var needs []linkNeed
	for si := range t.Sites {
		for fi := range t.Sites[si].Fabrics {
			f := &t.Sites[si].Fabrics[fi]
			fpath := fmt.Sprintf("sites[%d].fabrics[%d]", si, fi)
			for _, c := range f.Cables {
				usePrefix(used, c.IPv4)
				usePrefix(used, c.IPv6)
			}
			for _, u := range f.Uplinks {
				usePrefix(used, u.IPv4)
			}
			for _, u := range f.SpineUplinks {
				usePrefix(used, u.IPv4)
			}
			for _, sws := range [][]domain.Switch{f.SuperSpines, f.Spines, f.Leaves} {
				for _, sw := range sws {
					if a, err := netip.ParseAddr(sw.Loopback); err == nil {
						used.add(netip.PrefixFrom(a, a.BitLen()))
					}
				}
			}
			for _, v6 := range []bool{false, true} {
				n, err := fabricNeeds(f, fpath, v6)
				if err != nil {
					return err
				}
				needs = append(needs, n...)
			}
		}
	}
	if len(needs) == 0 {
		return nil
	}

	// Reuse first, for every fabric, so a new cable early in the file cannot
	// take an address a later, existing cable held.
	old := prevAddresses(prev)
	for _, n := range needs {
		pv, ok := old[nicKey{n.cable.Server, n.cable.NIC}]
		if !ok {
			continue
		}
		s := pv[0]
		if n.v6 {
			s = pv[1]
		}
		p, err := parseLink(s, n.v6)
		if err != nil || !n.pool.prefix.Contains(p.Addr()) || used.used(p) {
			continue
		}
		setLink(n, p)
		used.add(p)
		n.pool.left--
	}

	for _, n := range needs {
		if linkValue(n) != "" {
			continue
		}
		p, ok := n.pool.take(used, n.v6)
		if !ok {
			bits := linkBits4
			if n.v6 {
				bits = linkBits6
			}
			return domain.Invalid(n.path, "link pool %s (%s) has no free /%d left for %s; %d cables still need an address: use a larger pool",
				n.pool.prefix, n.pool.path, bits, cableRef(n.cable), n.pool.left)
		}
		setLink(n, p)
		used.add(p)
		n.pool.left--
	}
	return nil
}

// fabricNeeds lists the cables of f lacking an address of one family, with
// the pool to fill them from. The pool is only parsed when something needs it
// (Validate reports a bad but unused pool).
func fabricNeeds(f *domain.Fabric, fpath string, v6 bool) ([]linkNeed, error) {
	poolStr, field, suffix := f.LinkPools.IPv4, "ipv4", "ipv4"
	if v6 {
		poolStr, field, suffix = f.LinkPools.IPv6, "ipv6", "ipv6"
	}
	if poolStr == "" {
		return nil, nil
	}
	var needs []linkNeed
	pool := &linkPool{path: fpath + ".linkPools." + field}
	for i := range f.Cables {
		c := &f.Cables[i]
		v := c.IPv4
		if v6 {
			v = c.IPv6
		}
		if v == "" {
			needs = append(needs, linkNeed{cable: c, path: fmt.Sprintf("%s.cables[%d].%s", fpath, i, suffix), v6: v6, pool: pool})
		}
	}
	if len(needs) == 0 {
		return nil, nil
	}
	p, err := parsePool(poolStr, v6)
	if err != nil {
		return nil, domain.Invalid(pool.path, "link pool %q is %v; %d cables need addresses from it", poolStr, err, len(needs))
	}
	pool.prefix, pool.next, pool.left = p, p.Addr(), len(needs)
	return needs, nil
}

// take returns the lowest free link prefix at or after the pool's cursor.
// Addresses below the cursor are never free again within one Normalize, so
// a whole pool is scanned at most once.
func (p *linkPool) take(used *addrSet, v6 bool) (netip.Prefix, bool) {
	bits := linkBits4
	if v6 {
		bits = linkBits6
	}
	a := p.next
	for a.IsValid() && p.prefix.Contains(a) {
		cand := netip.PrefixFrom(a, bits)
		next := a.Next()
		if next.IsValid() {
			next = next.Next()
		}
		a = next
		if !used.used(cand) {
			p.next = a
			return cand, true
		}
	}
	p.next = a
	return netip.Prefix{}, false
}

func usePrefix(used *addrSet, s string) {
	if s == "" {
		return
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		used.add(p)
	}
}

func linkValue(n linkNeed) string {
	if n.v6 {
		return n.cable.IPv6
	}
	return n.cable.IPv4
}

func setLink(n linkNeed, p netip.Prefix) {
	if n.v6 {
		n.cable.IPv6 = p.String()
	} else {
		n.cable.IPv4 = p.String()
	}
}

// prevAddresses maps (server, nic) to the [ipv4, ipv6] its cable had.
func prevAddresses(prev *domain.Topology) map[nicKey][2]string {
	out := map[nicKey][2]string{}
	if prev == nil {
		return out
	}
	for _, site := range prev.Sites {
		for _, f := range site.Fabrics {
			for _, c := range f.Cables {
				k := nicKey{c.Server, c.NIC}
				if _, dup := out[k]; !dup {
					out[k] = [2]string{c.IPv4, c.IPv6}
				}
			}
		}
	}
	return out
}

func cableRef(c *domain.Cable) string {
	return fmt.Sprintf("cable %s/%s -> %s/%s", c.Server, c.NIC, c.Leaf, c.Port)
}
