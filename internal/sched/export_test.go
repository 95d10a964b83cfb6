package sched

import "time"

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
	for k, u := range cr.used {
		used[k] = u.units
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
