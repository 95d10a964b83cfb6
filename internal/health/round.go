package health

import (
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/telemetry"
)

// Round is every hop of every indexed job judged once against the
// readings at one time. The leader's loop makes one after each ingest (it
// needs every job's verdict anyway); job health and hotspots then answer
// from it instead of reading every entity again, and an uplink shared by
// many jobs is judged once, not once per job. A Round is immutable.
type Round struct {
	ix       *Index
	th       *Thresholds
	at       time.Time
	ports    []hopResult // by port index, where judged
	judged   []bool
	hosts    map[string]hopResult // GPU and NIC hops, by name
	verdicts map[uint64]Verdict
}

// JudgeAll judges every indexed job's path against rd at at.
func (ix *Index) JudgeAll(rd telemetry.Reader, th *Thresholds, at time.Time) *Round {
	r := &Round{ix: ix, th: th, at: at, ports: make([]hopResult, len(ix.topo.ports)), judged: make([]bool, len(ix.topo.ports)),
		hosts: map[string]hopResult{}, verdicts: make(map[uint64]Verdict, len(ix.paths))}
	judge := func(h *Hop) hopResult {
		if h.port >= 0 {
			if !r.judged[h.port] {
				r.ports[h.port], r.judged[h.port] = th.judgeHop(h, rd), true
			}
			return r.ports[h.port]
		}
		res, ok := r.hosts[h.Name]
		if !ok {
			res = th.judgeHop(h, rd)
			r.hosts[h.Name] = res
		}
		return res
	}
	for id, p := range ix.paths {
		r.verdicts[id], _ = th.judgePath(p, judge)
	}
	return r
}

// Index is the index the round judged.
func (r *Round) Index() *Index { return r.ix }

// Covers reports whether the round can answer for job id as of ix, a
// later index: the job's path is the very one the round judged (Build
// reuses an unchanged path), so a state change elsewhere does not send
// every answer back to live judging.
func (r *Round) Covers(ix *Index, id uint64) bool {
	p, ok := ix.paths[id]
	q, ok2 := r.ix.paths[id]
	return ok && ok2 && p == q
}

// SameTopology reports whether the round judged ix's topology.
func (r *Round) SameTopology(ix *Index) bool { return r.ix.topo == ix.topo }

// At is when the round judged.
func (r *Round) At() time.Time { return r.at }

// Verdict is job id's verdict in the round.
func (r *Round) Verdict(id uint64) (Verdict, bool) {
	v, ok := r.verdicts[id]
	return v, ok
}

// cached judges a hop of an indexed path from the round alone.
func (r *Round) cached(h *Hop) hopResult {
	if h.port >= 0 {
		return r.ports[h.port]
	}
	return r.hosts[h.Name]
}

// JobHealth is Index.JobHealth as of the round.
func (r *Round) JobHealth(id uint64, sees Viewer) (api.JobHealth, bool) {
	return r.ix.jobHealth(id, r.th, r.cached, sees, r.at)
}

// Hotspots is Index.Hotspots as of the round; an unscoped caller's ports
// that no job's path holds (the round did not judge them) are judged
// against rd now.
func (r *Round) Hotspots(rd telemetry.Reader, sees Viewer, scoped bool, limit int) api.Hotspots {
	return r.ix.hotspots(func(h *Hop) hopResult {
		if h.port >= 0 && r.judged[h.port] {
			return r.ports[h.port]
		}
		return r.th.judgeHop(h, rd)
	}, sees, scoped, limit, r.at)
}
