package verify_test

import (
	"math/rand/v2"
	"net/netip"
	"slices"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

// breakJobs applies one to four random mutations to it (and in), each on
// a segmented VRF or one of its ports, and says which.
func breakJobs(rng *rand.Rand, in *fabric.Input, it *fabric.Intent) string {
	type vrfAt struct{ dev, vrf int }
	type portAt struct{ dev, port int }
	var vrfs []vrfAt
	var ports []portAt
	for i := range it.Devices {
		d := &it.Devices[i]
		for j := range d.VRFs {
			if p := d.VRFs[j].Policy; p != nil && len(p.Groups) >= 2 {
				vrfs = append(vrfs, vrfAt{i, j})
			}
		}
		for j := range d.Ports {
			if v := d.VRF(d.Ports[j].VRF); v != nil && v.Policy != nil && len(v.Policy.Groups) >= 2 {
				ports = append(ports, portAt{i, j})
			}
		}
	}
	var what string
	for range 1 + rng.IntN(4) {
		va := vrfs[rng.IntN(len(vrfs))]
		v := &it.Devices[va.dev].VRFs[va.vrf]
		pa := ports[rng.IntN(len(ports))]
		p := &it.Devices[pa.dev].Ports[pa.port]
		switch k := rng.IntN(7); k {
		case 0: // a policy contract between two groups of a VRF, fabric-wide
			what += " policy-contract"
			if v.Policy == nil {
				continue
			}
			gs := v.Policy.Groups
			a, b := gs[rng.IntN(len(gs))].ID, gs[rng.IntN(len(gs))].ID
			for i := range it.Devices {
				if w := it.Devices[i].VRF(v.Name); w != nil && w.Policy != nil {
					w.Policy.Contracts = append(slices.Clone(w.Policy.Contracts), fabric.PolicyContract{A: a, B: b})
				}
			}
		case 1: // a port into another group of its VRF
			what += " regroup"
			pol := it.Devices[pa.dev].VRF(p.VRF).Policy
			if pol == nil {
				continue
			}
			gs := pol.Groups
			p.Group = gs[rng.IntN(len(gs))].ID
		case 2: // a port's ACL widened to one port of its VRF, or many
			what += " widen-acl"
			var allow []netip.Prefix
			if p.ACL != nil {
				allow = slices.Clone(p.ACL.Allow)
			}
			if rng.IntN(2) == 0 {
				// One other port of the VRF, anywhere in the list.
				q := &ports[rng.IntN(len(ports))]
				if o := &it.Devices[q.dev].Ports[q.port]; o.VRF == p.VRF {
					k := rng.IntN(len(allow) + 1)
					allow = slices.Insert(allow, k, o.Prefixes()...)
				}
			} else {
				for i := range it.Devices {
					for j := range it.Devices[i].Ports {
						if q := &it.Devices[i].Ports[j]; q.VRF == p.VRF && rng.IntN(2) == 0 {
							allow = append(allow, q.Prefixes()...)
						}
					}
				}
			}
			p.ACL = &fabric.ACL{Allow: allow}
		case 3: // a VRF's policy dropped on one leaf
			what += " drop-policy"
			v.Policy = nil
		case 5, 6: // an input contract between two jobs' groups; on 5 the intent's policies allow it too
			what += " job-contract"
			var gs []fabric.Group
			for _, g := range in.Groups {
				if g.JobID != "" && g.Tenant == in.Groups[rng.IntN(len(in.Groups))].Tenant {
					gs = append(gs, g)
				}
			}
			if len(gs) < 2 {
				continue
			}
			a, b := gs[rng.IntN(len(gs))], gs[rng.IntN(len(gs))]
			in.Contracts = append(in.Contracts, fabric.Contract{Tenant: a.Tenant, A: a.Name, B: b.Name})
			if k == 6 {
				continue
			}
			for i := range it.Devices {
				for j := range it.Devices[i].VRFs {
					if w := &it.Devices[i].VRFs[j]; w.Tenant == a.Tenant && w.Policy != nil {
						w.Policy.Contracts = append(slices.Clone(w.Policy.Contracts), fabric.PolicyContract{A: a.ID, B: b.ID})
					}
				}
			}
		case 4: // the input's contracts dropped (the intent still allows them)
			what += " drop-contracts"
			in.Contracts = nil
		}
	}
	return what
}

// cloneIntent copies what breakJobs changes: devices, their ports and
// VRFs (policies are replaced, never edited in place, except by field
// through a cloned VRF).
func cloneIntent(it fabric.Intent) fabric.Intent {
	it.Devices = slices.Clone(it.Devices)
	for i := range it.Devices {
		d := &it.Devices[i]
		d.Ports = slices.Clone(d.Ports)
		d.VRFs = slices.Clone(d.VRFs)
		for j := range d.VRFs {
			if p := d.VRFs[j].Policy; p != nil {
				c := *p
				d.VRFs[j].Policy = &c
			}
		}
	}
	return it
}

// breakAny is breakJobs plus mutations the other checks look at: a VRF
// importing another tenant's target, a port up or unguarded, a VNI or RD
// reused, a device's underlay list dropped, an allocation dropped, a port
// listed twice in two VRFs, a transit switch's EVPN session dropped or its
// next hop rewritten.
func breakAny(rng *rand.Rand, in *fabric.Input, it *fabric.Intent) string {
	if rng.IntN(2) == 0 {
		return breakJobs(rng, in, it)
	}
	var what string
	for range 1 + rng.IntN(3) {
		d := &it.Devices[rng.IntN(len(it.Devices))]
		for len(d.VRFs) == 0 || len(d.Ports) == 0 {
			d = &it.Devices[rng.IntN(len(it.Devices))]
		}
		v := &d.VRFs[rng.IntN(len(d.VRFs))]
		p := &d.Ports[rng.IntN(len(d.Ports))]
		switch rng.IntN(10) {
		case 7:
			what += " port-in-two-vrfs"
			for range 50 {
				if p.VRF != "" {
					break
				}
				p = &d.Ports[rng.IntN(len(d.Ports))]
			}
			q := *p
			q.VRF = d.VRFs[rng.IntN(len(d.VRFs))].Name
			d.Ports = append(d.Ports, q)
		case 8, 9: // a transit switch's EVPN session dropped, or its next hop rewritten
			what += " evpn-session"
			for range 50 {
				if t := &it.Devices[rng.IntN(len(it.Devices))]; t.Role.Transit() && len(t.Sessions) > 0 {
					t.Sessions = slices.Clone(t.Sessions)
					if k := rng.IntN(len(t.Sessions)); rng.IntN(2) == 0 {
						t.Sessions = slices.Delete(t.Sessions, k, k+1)
					} else {
						t.Sessions[k].NextHopUnchanged = false
					}
					break
				}
			}
		case 0:
			what += " leak-rt"
			o := &d.VRFs[rng.IntN(len(d.VRFs))]
			v.Imports = append(slices.Clone(v.Imports), o.RT)
		case 1:
			what += " unquarantine"
			p.Quarantined = false
		case 2:
			what += " unguard"
			p.Guarded = false
		case 3:
			what += " reuse-vni"
			v.L3VNI = d.VRFs[rng.IntN(len(d.VRFs))].L3VNI
		case 4:
			what += " reuse-rd"
			v.RD = d.VRFs[rng.IntN(len(d.VRFs))].RD
		case 5:
			what += " drop-underlay"
			d.Underlay = nil
		case 6:
			what += " drop-allocation"
			if len(in.Allocations) > 0 {
				k := rng.IntN(len(in.Allocations))
				in.Allocations = slices.Delete(slices.Clone(in.Allocations), k, k+1)
			}
		}
	}
	return what
}
