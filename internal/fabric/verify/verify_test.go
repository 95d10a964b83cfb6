package verify_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/verify"
)

// fixture is the segmented scenario of fabrictest on FRR leaves: acme
// (server isolation; s1-gpu001 whole, s2-gpu001), globex (GPU isolation,
// segmented: job 21 on s1-leaf0/swp2, job 22 on s1-leaf1/swp2,
// s2-leaf0/swp2 and s2-leaf1/swp2, a storage group contracted with job 22)
// and initech (vlan-aware, segmented: job 31 on s1-leaf0/swp3,
// s1-leaf1/swp3 and s2-leaf0/swp3).
func fixture(t *testing.T) (fabric.Input, *fabric.Intent) {
	t.Helper()
	in, err := fabrictest.Input("frr", fabrictest.Segmented)
	if err != nil {
		t.Fatal(err)
	}
	it, err := fabric.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	return in, it
}

func vrf(t *testing.T, it *fabric.Intent, dev, name string) *fabric.VRF {
	t.Helper()
	d := it.Device(dev)
	if d == nil || d.VRF(name) == nil {
		t.Fatalf("no VRF %s on %s", name, dev)
	}
	return d.VRF(name)
}

func port(t *testing.T, it *fabric.Intent, dev, name string) *fabric.Port {
	t.Helper()
	d := it.Device(dev)
	if d == nil || d.Port(name) == nil {
		t.Fatalf("no port %s/%s", dev, name)
	}
	return d.Port(name)
}

// ungroup removes a port from the policy groups of its VRF on dev.
func ungroup(t *testing.T, it *fabric.Intent, dev, name string) {
	t.Helper()
	p := port(t, it, dev, name)
	pol := vrf(t, it, dev, p.VRF).Policy
	for i := range pol.Groups {
		g := &pol.Groups[i]
		if j := slices.Index(g.Ports, name); j >= 0 {
			g.Ports = slices.Delete(slices.Clone(g.Ports), j, j+1)
			g.Prefixes = slices.DeleteFunc(slices.Clone(g.Prefixes), func(q netip.Prefix) bool { return slices.Contains(p.Prefixes(), q) })
		}
	}
}

// regroup moves a port into group id of its VRF's policy on dev.
func regroup(t *testing.T, it *fabric.Intent, dev, name string, id uint16) {
	t.Helper()
	ungroup(t, it, dev, name)
	p := port(t, it, dev, name)
	p.Group = id
	pol := vrf(t, it, dev, p.VRF).Policy
	i := slices.IndexFunc(pol.Groups, func(g fabric.PolicyGroup) bool { return g.ID == id })
	if i < 0 {
		pol.Groups = append(pol.Groups, fabric.PolicyGroup{ID: id})
		i = len(pol.Groups) - 1
	}
	pol.Groups[i].Ports = append(slices.Clone(pol.Groups[i].Ports), name)
	pol.Groups[i].Prefixes = append(slices.Clone(pol.Groups[i].Prefixes), p.Prefixes()...)
}

func TestCorrectIntentsPass(t *testing.T) {
	for _, nos := range fabrictest.NOSes() {
		for _, model := range fabrictest.Models() {
			for _, placement := range []fabric.VRFPlacement{fabric.VRFsOnAllLeaves, fabric.VRFsWhereUsed} {
				in, err := fabrictest.Input(nos, model)
				if err != nil {
					t.Fatal(err)
				}
				in.Options.VRFPlacement = placement
				it, err := fabric.Compile(in)
				if err != nil {
					t.Fatal(err)
				}
				if r := verify.Verify(in, it); !r.OK() {
					t.Errorf("%s %s %s: a compiled intent fails:\n%s", nos, model, placement, r)
				}
			}
		}
	}
}

// TestMutations starts from the correct intent of the fixture, breaks one
// thing, and checks that the verifier names exactly the rules it broke
// (the first rule listed is the one the mutation is about; the others
// follow from it).
func TestMutations(t *testing.T) {
	tests := map[string]struct {
		mutate func(t *testing.T, in *fabric.Input, it *fabric.Intent)
		want   []string // failing rules
	}{
		"leak an RT import": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				v := vrf(t, it, "s1-leaf0", "acme")
				v.Imports = []fabric.RouteTarget{vrf(t, it, "s1-leaf0", "globex").RT}
			},
			want: []string{verify.RuleRTImport, verify.RuleReachTenant},
		},
		"put a port in two VRFs": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				d := it.Device("s1-leaf1")
				p := *d.Port("swp2") // job 22 of globex
				p.VRF, p.Tenant, p.Group, p.ACL = "acme", "acme", 0, nil
				d.Ports = append(d.Ports, p)
			},
			want: []string{verify.RuleLinkTwoVRFs, verify.RuleJobVRF, verify.RuleBindingTenant, verify.RuleReachTenant},
		},
		"move a job's port to another VRF": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				ungroup(t, it, "s1-leaf1", "swp2")
				p := port(t, it, "s1-leaf1", "swp2")
				p.VRF, p.Tenant, p.Group, p.ACL = "acme", "acme", 0, nil
			},
			want: []string{verify.RuleJobVRF, verify.RuleJobGroup, verify.RuleBindingTenant, verify.RuleReachTenant},
		},
		"duplicate a VNI": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				vrf(t, it, "s2-leaf0", "initech").L3VNI = vrf(t, it, "s2-leaf0", "globex").L3VNI
			},
			want: []string{verify.RuleVNIShared},
		},
		"reuse an L2VNI on a second link": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				port(t, it, "s1-leaf1", "swp3").L2VNI = port(t, it, "s1-leaf0", "swp3").L2VNI
			},
			want: []string{verify.RuleVNIReused},
		},
		"give two VRFs of a leaf one L3 VLAN": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				vrf(t, it, "s1-leaf0", "acme").L3VLAN = 3000
				vrf(t, it, "s1-leaf0", "globex").L3VLAN = 3000
				vrf(t, it, "s1-leaf1", "globex").L3VLAN = 3000 // another leaf: its own VLANs
			},
			want: []string{verify.RuleVLANShared},
		},
		"give a VRF a link's VLAN as its L3 VLAN": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				p := port(t, it, "s1-leaf0", "swp3")
				if p.VLAN == 0 {
					t.Fatalf("fixture: s1-leaf0 swp3 has no link VLAN")
				}
				vrf(t, it, "s1-leaf0", "acme").L3VLAN = p.VLAN
			},
			want: []string{verify.RuleVLANShared},
		},
		"reuse an RD": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				vrf(t, it, "s1-leaf0", "globex").RD = vrf(t, it, "s1-leaf0", "acme").RD
			},
			want: []string{verify.RuleRDShared},
		},
		"share a route target": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				for i := range it.Devices {
					if v := it.Devices[i].VRF("initech"); v != nil {
						v.RT = it.Devices[i].VRF("globex").RT
					}
				}
			},
			want: []string{verify.RuleRTShared, verify.RuleRTImport, verify.RuleReachTenant},
		},
		"share a group ID between tenants": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				for _, dev := range []string{"s1-leaf0", "s1-leaf1", "s2-leaf0"} {
					regroup(t, it, dev, "swp3", 102) // initech's job 31 into globex's job-22 ID
				}
			},
			want: []string{verify.RuleGroupShared, verify.RuleJobGroup},
		},
		"drop a port from its job group": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				ungroup(t, it, "s2-leaf0", "swp2")
				port(t, it, "s2-leaf0", "swp2").Group = 0
			},
			want: []string{verify.RuleJobGroup},
		},
		"clear a port's group but leave it in the group's member list": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				port(t, it, "s2-leaf0", "swp2").Group = 0
			},
			want: []string{verify.RuleGroupPort},
		},
		"classify a port into another job's group": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				regroup(t, it, "s1-leaf0", "swp2", 102) // job 21 into job 22's group
			},
			want: []string{verify.RuleJobGroup, verify.RuleReachJobGBP},
		},
		"add a contract between two jobs": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				for i := range it.Devices {
					if v := it.Devices[i].VRF("globex"); v != nil {
						v.Policy.Contracts = append(v.Policy.Contracts, fabric.PolicyContract{A: 101, B: 102})
					}
				}
			},
			want: []string{verify.RuleReachJobGBP},
		},
		"widen a port's ACL to another job": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				p := port(t, it, "s1-leaf0", "swp2") // job 21
				p.ACL = &fabric.ACL{Allow: append(slices.Clone(p.ACL.Allow), port(t, it, "s1-leaf1", "swp2").Prefixes()...)}
			},
			want: []string{verify.RuleReachJobACL},
		},
		"leave a port in its VRF after its job stopped": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				in.Allocations = slices.DeleteFunc(in.Allocations, func(a fabric.Allocation) bool { return a.JobID == "21" })
			},
			want: []string{verify.RuleBindingOrphan, verify.RuleReachTenant},
		},
		"a job placed but not compiled": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				in.Allocations = append(in.Allocations, fabric.Allocation{Tenant: "globex", Server: "s2-gpu004", GPUs: []int{1}, JobID: "23"})
				in.Groups = append(in.Groups, fabric.Group{Tenant: "globex", Name: "job-23", ID: 103, JobID: "23"})
			},
			want: []string{verify.RuleJobVRF, verify.RuleJobGroup, verify.RuleBindingUnbound},
		},
		"unbind the other link of a server-isolated tenant's server": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				// acme holds GPU 0 of s2-gpu001 only; server isolation
				// still gives it the link of GPU 1 (s2-leaf1/swp1).
				p := port(t, it, "s2-leaf1", "swp1")
				p.VRF, p.Tenant, p.Jobs, p.Quarantined = "", "", nil, true
			},
			want: []string{verify.RuleBindingUnbound},
		},
		"unbind a port but leave it up": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				p := port(t, it, "s2-leaf1", "swp1")
				p.VRF, p.Tenant, p.Jobs = "", "", nil
			},
			want: []string{verify.RuleBindingUnbound, verify.RulePortQuarantine, verify.RuleReachControlPlane, verify.RuleReachUnderlay, verify.RuleReachVNI},
		},
		"un-quarantine an unassigned port": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				p := port(t, it, "s2-leaf1", "swp4") // s2-gpu004 nic1: nobody's
				if p.Assigned() || !p.Quarantined {
					t.Fatalf("fixture: %+v is not an unassigned, quarantined port", p)
				}
				p.Quarantined = false
			},
			want: []string{verify.RulePortQuarantine, verify.RuleReachControlPlane, verify.RuleReachUnderlay, verify.RuleReachVNI},
		},
		"quarantine a job's port": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				port(t, it, "s1-leaf0", "swp2").Quarantined = true
			},
			want: []string{verify.RulePortQuarantine},
		},
		"drop the guard from a port": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				port(t, it, "s1-leaf0", "swp2").Guarded = false
			},
			want: []string{verify.RulePortGuard, verify.RuleReachControlPlane, verify.RuleReachUnderlay, verify.RuleReachVNI},
		},
		"drop the guard from an unassigned port": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				port(t, it, "s2-leaf1", "swp4").Guarded = false // down, but unguarded
			},
			want: []string{verify.RulePortGuard},
		},
		"drop the source-address validation from a port": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				port(t, it, "s1-leaf0", "swp2").Sources = nil
			},
			want: []string{verify.RulePortSource},
		},
		"let a port send as another tenant's server": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				p := port(t, it, "s1-leaf0", "swp2")
				other := port(t, it, "s1-leaf0", "swp1")
				if other.Tenant == p.Tenant {
					t.Fatalf("fixture: %s and %s are both tenant %s's", p.Name, other.Name, p.Tenant)
				}
				p.Sources = append(slices.Clone(p.Sources), other.OwnSources()[0])
			},
			want: []string{verify.RulePortSource},
		},
		"let a port send from its whole link, the leaf's end included": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				p := port(t, it, "s1-leaf0", "swp2")
				p.Sources = p.Prefixes()
			},
			want: []string{verify.RulePortSource},
		},
		"drop the underlay list of a device": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				it.Device("s1-leaf0").Underlay = nil
			},
			want: []string{verify.RuleReachUnderlay, verify.RuleReachVNI},
		},
		"leave a spine's loopback out of the underlay list": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				d := it.Device("s2-leaf0")
				spine := it.Device("spine2").Loopback
				var keep []netip.Prefix
				for _, p := range d.Underlay {
					if !p.Contains(spine) {
						keep = append(keep, p)
					}
				}
				d.Underlay = keep
			},
			want: []string{verify.RuleReachUnderlay},
		},
		"drop the switch group's ICMP allowance": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				vrf(t, it, "s2-leaf0", "globex").Policy.Switch = 0
			},
			want: []string{verify.RuleICMPSwitchGroup},
		},
		"classify a port into the switch group": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				regroup(t, it, "s1-leaf0", "swp2", fabric.SwitchGroup) // job 21 passes as the switch
			},
			want: []string{verify.RuleSwitchGroupForged, verify.RuleJobGroup, verify.RuleReachJobGBP},
		},
		"name the wrong jobs on a port": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				port(t, it, "s1-leaf0", "swp1").Jobs = []string{"99"}
			},
			want: []string{verify.RuleBindingJobs},
		},
		"name a VRF the device does not have": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				port(t, it, "s1-leaf0", "swp1").VRF = "nope"
			},
			// In no VRF it has, and up: the attacker model puts it in the default table.
			want: []string{verify.RuleLinkNoSuchVRF, verify.RuleBindingUnbound, verify.RuleJobVRF, verify.RuleReachControlPlane, verify.RuleReachUnderlay, verify.RuleReachVNI},
		},
		"give two tenants one VRF name": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				v := vrf(t, it, "s2-leaf1", "initech")
				v.Name = "acme2"
				vrf(t, it, "s1-leaf0", "initech").Name = "acme2"
				port(t, it, "s1-leaf0", "swp3").VRF = "acme2"
				vrf(t, it, "s1-leaf1", "acme").Name = "acme2"
				port(t, it, "s1-leaf1", "swp1").VRF = "acme2"
			},
			want: []string{verify.RuleVRFShared},
		},
		"a job on a link of two jobs of a segmented tenant": {
			mutate: func(t *testing.T, in *fabric.Input, it *fabric.Intent) {
				in.Allocations = append(in.Allocations, fabric.Allocation{Tenant: "globex", Server: "s1-gpu002", GPUs: []int{0}, JobID: "24"})
				in.Groups = append(in.Groups, fabric.Group{Tenant: "globex", Name: "job-24", ID: 104, JobID: "24"})
				var err error
				if *it, err = compileOrFail(*in); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{verify.RuleJobGroup, verify.RuleSharedLink},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in, it := fixture(t)
			tc.mutate(t, &in, it)
			r := sameReport(t, name, in, it)
			got := r.Rules()
			want := slices.Sorted(slices.Values(tc.want))
			if testing.Verbose() {
				t.Log(r.Text(5))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("failing rules %v, want %v\n%s", got, want, r.Text(0))
			}
			if r.OK() || r.Err() == nil {
				t.Error("a broken intent passed")
			}
		})
	}
}

func compileOrFail(in fabric.Input) (fabric.Intent, error) {
	it, err := fabric.Compile(in)
	if err != nil {
		return fabric.Intent{}, err
	}
	return *it, nil
}

func ep(s string) verify.Endpoint {
	leaf, port, _ := strings.Cut(s, "/")
	return verify.Endpoint{Leaf: leaf, Port: port}
}

func eps(ss ...string) []verify.Endpoint {
	var out []verify.Endpoint
	for _, s := range ss {
		out = append(out, ep(s))
	}
	return out
}

// TestReachability checks the matrix of the fixture endpoint by endpoint:
// what a ping from each server link would reach.
func TestReachability(t *testing.T) {
	_, it := fixture(t)
	tests := map[string]struct {
		enforce verify.Enforcement
		from    string
		want    []verify.Endpoint
	}{
		"acme reaches all its links (server isolation, both stripes)":  {verify.EnforceByNOS, "s1-leaf0/swp1", eps("s1-leaf1/swp1", "s2-leaf0/swp1", "s2-leaf1/swp1")},
		"job 21 is alone in its group":                                 {verify.EnforceByNOS, "s1-leaf0/swp2", nil},
		"job 22 reaches its other links":                               {verify.EnforceByNOS, "s1-leaf1/swp2", eps("s2-leaf0/swp2", "s2-leaf1/swp2")},
		"initech's job 31 over its anycast gateways":                   {verify.EnforceByNOS, "s1-leaf0/swp3", eps("s1-leaf1/swp3", "s2-leaf0/swp3")},
		"an unassigned link reaches nothing":                           {verify.EnforceByNOS, "s1-leaf0/swp4", nil},
		"routing alone: job 21 reaches job 22 (policy separates them)": {verify.EnforceNone, "s1-leaf0/swp2", eps("s1-leaf1/swp2", "s2-leaf0/swp2", "s2-leaf1/swp2")},
		"ACLs alone separate the jobs too":                             {verify.EnforceACL, "s1-leaf0/swp2", nil},
		"group policy alone separates the jobs too":                    {verify.EnforceGroupPolicy, "s2-leaf1/swp2", eps("s1-leaf1/swp2", "s2-leaf0/swp2")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := verify.Reachability(it, tc.enforce)
			if got := m[ep(tc.from)]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s reaches %v, want %v", tc.from, got, tc.want)
			}
			for _, to := range tc.want {
				if !m.Reaches(ep(tc.from), to) {
					t.Errorf("Reaches(%s, %s) = false", tc.from, to)
				}
			}
		})
	}
	m := verify.Reachability(it, verify.EnforceByNOS)
	if len(m) != 16 || m.Pairs() != 12+0+6+6 {
		t.Errorf("matrix of %d endpoints and %d pairs, want 16 and 24", len(m), m.Pairs())
	}
	raw, err := json.Marshal(m)
	if err != nil || !strings.Contains(string(raw), `"s1-leaf0/swp1":["s1-leaf1/swp1",`) {
		t.Errorf("matrix JSON %s (%v): want leaf/port keys", raw, err)
	}
	var back verify.Matrix
	if err := json.Unmarshal(raw, &back); err != nil || back.Pairs() != m.Pairs() {
		t.Errorf("matrix JSON does not read back: %v", err)
	}
}

// TestEnforcementFormsAgree: on every compiled scenario, group policy and
// the ACL fallback give the same reachability (so a mixed fabric behaves
// the same on every leaf), and segmentation only removes pairs.
func TestEnforcementFormsAgree(t *testing.T) {
	eachScenario(t, func(nos, model string, _ fabric.Input, it *fabric.Intent) {
		gbp, acl := verify.Reachability(it, verify.EnforceGroupPolicy), verify.Reachability(it, verify.EnforceACL)
		if !reflect.DeepEqual(gbp, acl) {
			t.Errorf("%s %s: group policy and ACLs disagree:\n%v\n%v", nos, model, gbp, acl)
		}
		if byNOS := verify.Reachability(it, verify.EnforceByNOS); !reflect.DeepEqual(byNOS, gbp) {
			t.Errorf("%s %s: the deployed form disagrees", nos, model)
		}
		none := verify.Reachability(it, verify.EnforceNone)
		for from, to := range gbp {
			for _, e := range to {
				if !none.Reaches(from, e) {
					t.Errorf("%s %s: %s reaches %s with policy but not without", nos, model, from, e)
				}
			}
		}
		if (model == fabrictest.Segmented) == (none.Pairs() == gbp.Pairs()) {
			t.Errorf("%s %s: %d pairs routed, %d with policy", nos, model, none.Pairs(), gbp.Pairs())
		}
	})
}

func TestReportRendering(t *testing.T) {
	in, it := fixture(t)
	ok := verify.Verify(in, it)
	if ok.Err() != nil || !strings.HasPrefix(ok.String(), "fabric verify: OK: 6 devices, 12 VRF instances, 16 endpoints (11 in a VRF, 5 quarantined, 16 guarded), 4 running jobs") {
		t.Errorf("a passing report renders as:\n%s(err %v)", ok, ok.Err())
	}
	if len(ok.Checks) != 10 || ok.Check(verify.CheckJobIsolation) == nil || !ok.Check(verify.CheckLinks).OK {
		t.Errorf("checks %+v", ok.Checks)
	}
	vrf(t, it, "s1-leaf0", "acme").Imports = []fabric.RouteTarget{vrf(t, it, "s1-leaf0", "globex").RT}
	bad := verify.Verify(in, it)
	text := bad.Text(2)
	for _, want := range []string{
		"fabric verify: FAILED (2 of 10 checks)",
		"  FAIL  tenant-ids ",
		"        rt-import s1-leaf0/vrf acme: tenant \"acme\" imports route target 65000:10002 of tenant \"globex\"",
		"        ... and ",
		"  ok    links ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	var de *domain.Error
	if err := bad.Err(); !errors.As(err, &de) || de.Code != domain.CodeFailedPrecondition || len(de.Details) != len(bad.Failures()) || de.Details[0].Rule == "" {
		t.Errorf("Err() = %v, want failed_precondition with one detail per failure", err)
	}
	raw, err := json.Marshal(bad)
	if err != nil || !strings.Contains(string(raw), `"rule":"rt-import"`) {
		t.Errorf("report JSON %s (%v)", raw, err)
	}
	if r := verify.Verify(in, nil); r.OK() || !slices.Contains(r.Rules(), verify.RuleBindingPort) {
		t.Errorf("no intent at all passes: %v", r.Rules())
	}
}

// TestDeterministic: a broken intent with its devices, ports and VRFs
// shuffled gives the same report.
func TestDeterministic(t *testing.T) {
	in, it := fixture(t)
	for i := range it.Devices {
		if v := it.Devices[i].VRF("initech"); v != nil {
			v.RT = it.Devices[i].VRF("globex").RT
		}
	}
	want := verify.Verify(in, it)
	raw, _ := json.Marshal(it)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		var c fabric.Intent
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		rng.Shuffle(len(c.Devices), func(i, j int) { c.Devices[i], c.Devices[j] = c.Devices[j], c.Devices[i] })
		for i := range c.Devices {
			d := &c.Devices[i]
			rng.Shuffle(len(d.Ports), func(i, j int) { d.Ports[i], d.Ports[j] = d.Ports[j], d.Ports[i] })
			rng.Shuffle(len(d.VRFs), func(i, j int) { d.VRFs[i], d.VRFs[j] = d.VRFs[j], d.VRFs[i] })
		}
		rng.Shuffle(len(in.Allocations), func(i, j int) { in.Allocations[i], in.Allocations[j] = in.Allocations[j], in.Allocations[i] })
		if got := verify.Verify(in, &c); !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffled intent, other report:\n%s\nwant\n%s", got.Text(0), want.Text(0))
		}
	}
}

// TestScale verifies a generated cluster of 40 tenants and 300 jobs, and
// that a leak between every tenant is reported within MaxFailures.
func TestScale(t *testing.T) {
	in, err := fabrictest.Scale(fabrictest.ScaleOptions{Stripes: 2, ServersPerStripe: 32, Spines: 4, Tenants: 40, Jobs: 300})
	if err != nil {
		t.Fatal(err)
	}
	it, err := fabric.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	r := verify.Verify(in, it)
	if !r.OK() || r.Stats.Jobs != 300 || r.Stats.Devices != 20 {
		t.Fatalf("generated cluster: %s", r)
	}
	for i := range it.Devices {
		for j := range it.Devices[i].VRFs {
			it.Devices[i].VRFs[j].Imports = []fabric.RouteTarget{{ASN: 65000, Value: 10000}} // everyone imports t0000
		}
	}
	r = verify.Verify(in, it)
	c := r.Check(verify.CheckTenantIsolation)
	if c.OK || len(c.Failures) != verify.MaxFailures || c.Omitted == 0 {
		t.Fatalf("a fabric-wide leak: %d failures listed, %d omitted; want %d listed and more omitted", len(c.Failures), c.Omitted, verify.MaxFailures)
	}
	if !slices.IsSortedFunc(c.Failures, func(a, b verify.Failure) int {
		return strings.Compare(a.Rule+a.Device+a.Object+a.Detail, b.Rule+b.Device+b.Object+b.Detail)
	}) {
		t.Error("failures are not sorted")
	}
}

// eachScenario compiles every NOS x model scenario (fabrictest.Input) and
// calls f with it.
func eachScenario(t *testing.T, f func(nos, model string, in fabric.Input, it *fabric.Intent)) {
	t.Helper()
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
			f(nos, model, in, it)
		}
	}
}

// scaleIntent is the intent the differential and golden tests break: 2
// stripes of 32 servers, 40 tenants, 300 jobs, VRFs where used, compiled.
func scaleIntent(t *testing.T) (fabric.Input, *fabric.Intent) {
	t.Helper()
	in, err := fabrictest.Scale(fabrictest.ScaleOptions{Stripes: 2, ServersPerStripe: 32, Spines: 4, Tenants: 40, Jobs: 300, Placement: fabric.VRFsWhereUsed})
	if err != nil {
		t.Fatal(err)
	}
	it, err := fabric.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	return in, it
}
