package verify

import (
	"strings"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

// VerifyReference is Verify with the reference job-isolation check: the
// differential tests compare its whole report with Verify's.
func VerifyReference(in fabric.Input, it *fabric.Intent) *Report {
	return verifyWith(in, it, (*verifier).refJobIsolation)
}

// refJobIsolation is jobIsolation as it was before issue 18's later
// pass (main 73645b3), kept as the reference the differential tests
// compare the optimised check with. It checks, for every endpoint of a segmented tenant, that it
// reaches no endpoint of the same tenant used by another job, unless the
// input's contracts join the two jobs' groups; under group policy and
// under the ACL fallback separately, since which one a leaf runs depends on
// its NOS.
func (v *verifier) refJobIsolation() Check {
	cb := newCheck(CheckJobIsolation, "in a segmented tenant no job reaches another job (default deny, allow within a group and per contract), under group policy and ACLs alike")
	m := v.m
	forms := []struct {
		rule string
		pol  *policy
	}{{RuleReachJobGBP, newPolicy(m, EnforceGroupPolicy)}, {RuleReachJobACL, newPolicy(m, EnforceACL)}}
	stamp := make([]int32, len(m.insts))
	mark := int32(0)
	var routes []int32
	for s := range m.eps {
		so := v.owner(int32(s))
		if so == nil || !v.x.segmented(so.tenant) {
			continue
		}
		if len(so.jobs) > 1 {
			cb.fail(RuleSharedLink, m.eps[s].ref.Leaf, m.eps[s].ref.Port, "serves jobs %s of segmented tenant %q: the network cannot separate jobs that share a link",
				strings.Join(so.jobs, ", "), so.tenant)
		}
		for _, vi := range m.eps[s].inst {
			mark++
			routes = m.routesFrom(vi, routes, stamp, mark)
			for _, u := range routes {
				for _, t := range m.insts[u].eps {
					to := v.owner(t)
					if t == int32(s) || to == nil || to.tenant != so.tenant || refIntended(v.x, so.tenant, so.jobs, to.jobs) {
						continue
					}
					for _, f := range forms {
						if f.pol.allows(int32(s), t, u) {
							cb.fail(f.rule, m.eps[s].ref.Leaf, m.eps[s].ref.Port, "(job %s) reaches %s (job %s) of tenant %q in %s",
								jobList(so.jobs), m.name(t), jobList(to.jobs), so.tenant, m.instName(u))
						}
					}
				}
			}
		}
		if l2 := m.eps[s].l2vni; l2 != 0 {
			for _, t := range m.l2[l2] {
				to := v.owner(t)
				if t == int32(s) || to == nil || to.tenant != so.tenant || refIntended(v.x, so.tenant, so.jobs, to.jobs) || !m.bridged(int32(s), t) {
					continue
				}
				for _, f := range forms {
					cb.fail(f.rule, m.eps[s].ref.Leaf, m.eps[s].ref.Port, "(job %s) reaches %s (job %s) of tenant %q: bridged over L2VNI %d, no policy applies",
						jobList(so.jobs), m.name(t), jobList(to.jobs), so.tenant, l2)
				}
			}
		}
	}
	return cb.done()
}

// refIntended is expected.intended before issue 18's later pass: it reports whether endpoints used by jobs js and jt of a segmented
// tenant may talk: they share a job, or the input has a contract between
// their jobs' groups.
func refIntended(x *expected, tenant string, js, jt []string) bool {
	for _, a := range js {
		for _, b := range jt {
			if a == b {
				return true
			}
			ga, gb := x.groups[jobRef{tenant, a}], x.groups[jobRef{tenant, b}]
			if ga != nil && gb != nil && x.contracts[contractKey{tenant, ga.Name, gb.Name}] {
				return true
			}
		}
	}
	return false
}
