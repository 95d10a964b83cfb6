package verify_test

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/verify"
)

// sameReport fails t unless Verify and the reference implementation of
// job isolation (verify.VerifyReference, the check as it was on main
// 73645b3) give the same report: every check, failure, order and count.
func sameReport(t *testing.T, what string, in fabric.Input, it *fabric.Intent) *verify.Report {
	t.Helper()
	got, want := verify.Verify(in, it), verify.VerifyReference(in, it)
	if !reflect.DeepEqual(got, want) {
		g, w := got.Check(verify.CheckJobIsolation), want.Check(verify.CheckJobIsolation)
		t.Errorf("%s: the report differs from the reference's\njob-isolation: %d failures, %d omitted, ok %v; reference: %d failures, %d omitted, ok %v\n%s\nreference:\n%s",
			what, len(g.Failures), g.Omitted, g.OK, len(w.Failures), w.Omitted, w.OK, got.Text(5), want.Text(5))
	}
	return got
}

// TestJobIsolationMatchesReference runs Verify and the reference on
// correct intents and on scale intents broken at random where job
// isolation looks (policy contracts, groups, ACLs, policies, input
// contracts), and compares whole reports. TestMutations compares them on
// each of its mutations too.
func TestJobIsolationMatchesReference(t *testing.T) {
	for _, nos := range fabrictest.NOSes() {
		for _, model := range fabrictest.Models() {
			in, err := fabrictest.Input(nos, model)
			if err != nil {
				t.Fatal(err)
			}
			it, err := fabric.Compile(in)
			if err != nil {
				t.Fatal(err)
			}
			sameReport(t, nos+" "+model, in, it)
		}
	}
	// Jobs 21 and 22 of globex contracted in the input and the intent:
	// their links may talk, nothing fails.
	in, it := fixture(t)
	in.Contracts = append(in.Contracts, fabric.Contract{Tenant: "globex", A: "job-21", B: "job-22"})
	for i := range it.Devices {
		if v := it.Devices[i].VRF("globex"); v != nil {
			v.Policy.Contracts = append(v.Policy.Contracts, fabric.PolicyContract{A: 101, B: 102})
		}
	}
	if r := sameReport(t, "contract two jobs", in, it); !r.OK() {
		t.Errorf("two contracted jobs fail:\n%s", r)
	}
	base, err := fabrictest.Scale(fabrictest.ScaleOptions{Stripes: 2, ServersPerStripe: 32, Spines: 4, Tenants: 40, Jobs: 300, Placement: fabric.VRFsWhereUsed})
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := fabric.Compile(base)
	if err != nil {
		t.Fatal(err)
	}
	if r := sameReport(t, "scale", base, compiled); !r.OK() {
		t.Fatalf("scale intent fails: %s", r)
	}
	failing := 0
	for seed := range uint64(48) {
		in, it := base, cloneIntent(*compiled)
		in.Contracts = slices.Clone(base.Contracts)
		rng := rand.New(rand.NewPCG(seed, 18))
		what := breakJobs(rng, &in, &it)
		r := sameReport(t, what, in, &it)
		if !r.Check(verify.CheckJobIsolation).OK {
			failing++
		}
	}
	// The comparison must have seen violations, not only clean reports.
	t.Logf("%d of 48 broken intents fail job isolation", failing)
	if failing < 24 {
		t.Errorf("only %d of 48 broken intents fail job isolation", failing)
	}
}

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
		case 2: // a port's ACL widened to ports of its VRF anywhere
			what += " widen-acl"
			var allow []netip.Prefix
			if p.ACL != nil {
				allow = slices.Clone(p.ACL.Allow)
			}
			for i := range it.Devices {
				for j := range it.Devices[i].Ports {
					if q := &it.Devices[i].Ports[j]; q.VRF == p.VRF && rng.IntN(2) == 0 {
						allow = append(allow, q.Prefixes()...)
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
