package sched

import (
	"fmt"
	"strings"
	"time"
)

// ScheduleExhaustive is Schedule deciding every job by full scans, without
// the cycle's scan cache (scans.go) or ranked servers (ranked.go), for the
// equivalence tests.
func ScheduleExhaustive(s *Snapshot, now time.Time) *Plan {
	cp := *s
	cp.exhaustive = true
	return Schedule(&cp, now)
}

// CarryStats is how many cycles patched cr's sums, how many summed every
// job, and how many kept the usage index.
func CarryStats(cr *Carry) (patches, resums, indexKept int) { return cr.syncs, cr.resums, cr.ixKept }

// CarryQueue reports whether cr keeps its lists of each workspace's
// pending jobs, and how many cycles found them not to hold the queue.
func CarryQueue(cr *Carry) (kept bool, misses int) { return cr.pendOK, cr.pendMiss }

// CarrySums brings cr to s's jobs and returns its sums as a cycle reads
// them: the shapes (ok false: summed whole this time), the hosts, and the
// units held per tenant/workspace pair.
func CarrySums(cr *Carry, s *Snapshot) (shapes []Shape, ok bool, hosts []Host, used map[[2]string]int) {
	cr.sync(s)
	shapes, ok = cr.shapesOf()
	for h := range cr.hosts(s) {
		cp := *h
		cp.Free = append([]int(nil), h.Free...)
		hosts = append(hosts, cp)
	}
	used = map[[2]string]int{}
	for p, u := range cr.used {
		if u.jobs > 0 {
			used[cr.tbl.pairs[p]] = u.units
		}
	}
	return shapes, ok, hosts, used
}

// WholeSums is what CarrySums answers, summed over every job of s.
func WholeSums(s *Snapshot) (shapes []Shape, hosts []Host, used map[[2]string]int) {
	for h := range s.hosts() {
		cp := *h
		cp.Free = append([]int(nil), h.Free...)
		hosts = append(hosts, cp)
	}
	used = map[[2]string]int{}
	for _, j := range s.Jobs {
		if len(j.Placement) > 0 {
			used[[2]string{j.Tenant, j.Workspace}] += held(j)
		}
	}
	return ShapesOf(s.Jobs), hosts, used
}

// CarryView brings cr to s's jobs and returns the cluster view a cycle
// through it starts from, written out (ViewOf), with how many servers
// the view has loaded again and how many times all of them.
func CarryView(cr *Carry, s *Snapshot) (view string, loads, full int) {
	cr.sync(s)
	c := buildClusterWith(s, cr)
	return viewOf(c), cr.viewLoads, cr.viewWhole
}

// WholeView is the view a cycle without a Carry starts from, written out
// as CarryView's.
func WholeView(s *Snapshot) string { return viewOf(buildCluster(s)) }

// viewOf writes out every server of c as the cycle reads it, and the
// totals.
func viewOf(c *cluster) string {
	var b strings.Builder
	fmt.Fprintf(&b, "total %d %v %v\n", c.total, c.totalModel, c.modelNames)
	for i, v := range c.servers {
		fmt.Fprintf(&b, "%d %s idx=%d free=%v nfree=%d mig=%v share=%v shareTenant=%v holders=%v excl=%q cpu=%d mem=%d ver=%d caps=%d/%d %s sig=%d\n",
			i, v.s.Name, v.idx, v.free, v.nfree, v.mig, v.share, v.shareTenant, v.holders, v.exclusive, v.cpuUsed, v.memUsed, v.ver, v.cpuCap, v.memCap, v.model, v.sigID)
	}
	return b.String()
}
