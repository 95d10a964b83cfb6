package sched

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
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

// CarryTable brings cr to s's jobs and reports the first way its table
// or its lists of pending jobs differ from those made afresh from s's
// jobs ("" when none): each row as rowOf makes it (the Carry's pair
// numbers), each pair's pending jobs in the workspace's own order.
func CarryTable(cr *Carry, s *Snapshot) string {
	cr.sync(s)
	t := &cr.tbl
	if len(t.jobs) != len(s.Jobs) || len(t.rows) != len(s.Jobs) {
		return fmt.Sprintf("%d jobs and %d rows for %d jobs", len(t.jobs), len(t.rows), len(s.Jobs))
	}
	for k, j := range s.Jobs {
		if t.jobs[k] != j {
			return fmt.Sprintf("job %d at %d is not the snapshot's copy", j.ID, k)
		}
		if want := cr.rowOf(j); t.rows[k] != want {
			return fmt.Sprintf("job %d's row %+v, made afresh %+v", j.ID, t.rows[k], want)
		}
	}
	// The pairs' places in the usage index the table kept, against
	// the index's own maps (of without its memo).
	if cr.ix != nil && t.ixFor == cr.ix.numbered {
		for i := range t.ixWS {
			p := t.pairs[i]
			wi, ti := -1, -1
			if x, ok := cr.ix.byRef[p[0]+"/"+p[1]]; ok {
				wi = x
			}
			if x, ok := cr.ix.byTenant[p[0]]; ok {
				ti = x
			}
			if int(t.ixWS[i]) != wi || int(t.ixT[i]) != ti {
				return fmt.Sprintf("pair %v kept at workspace %d, tenant %d; the index has %d, %d", p, t.ixWS[i], t.ixT[i], wi, ti)
			}
		}
	}
	if !cr.pendOK {
		return ""
	}
	kept := cr.pend
	cr.listPending()
	fresh := cr.pend
	cr.pend = kept
	for p := range max(len(kept), len(fresh)) {
		var a, b []pendJob
		if p < len(kept) {
			a = kept[p]
		}
		if p < len(fresh) {
			b = fresh[p]
		}
		if len(a) != len(b) {
			return fmt.Sprintf("pair %v lists %d pending jobs, made afresh %d", t.pairs[p], len(a), len(b))
		}
		for x := range a {
			if a[x] != b[x] {
				return fmt.Sprintf("pair %v's pending job %d is %+v, made afresh %+v", t.pairs[p], x, a[x], b[x])
			}
		}
	}
	return ""
}

// CarryMemos checks the statics' memos a Carry keeps across cycles
// against what they memoize: kept is how many answers it holds, wrong
// the first that is not mig.Place's or indexSets' ("" if none).
func CarryMemos(cr *Carry) (kept int, wrong string) {
	for k, start := range cr.migStarts {
		want, err := mig.Place(mig.Layout{Model: k.model, Instances: k.ins[:k.n]}, k.profile)
		if err != nil {
			want = -1
		}
		if start != want {
			return 0, fmt.Sprintf("%s on %s holding %v: kept start %d, mig.Place %d", k.profile, k.model, k.ins[:k.n], start, want)
		}
	}
	for k, sets := range cr.sets {
		if want := indexSets(k[0], k[1]); !reflect.DeepEqual(sets, want) {
			return 0, fmt.Sprintf("%d of %d GPUs: kept sets %v, indexSets %v", k[1], k[0], sets, want)
		}
	}
	return len(cr.migStarts) + len(cr.sets), ""
}

// CarryOdd reports the first entry of cr's view that loads its placement
// from a job (a share's, a MIG one's) other than s's copy of that job
// ("" when none), cr brought to s first.
func CarryOdd(cr *Carry, s *Snapshot) string {
	cr.sync(s)
	if cr.view == nil {
		return ""
	}
	byID := map[uint64]*domain.Job{}
	for _, j := range s.Jobs {
		byID[j.ID] = j
	}
	for i, l := range cr.view.on {
		for _, e := range l {
			if !e.whole && cr.view.odd[e.slot] != byID[e.id] {
				return fmt.Sprintf("server %d: job %d's placement %d is read from a copy not the snapshot's", i, e.id, e.p)
			}
		}
	}
	return ""
}
