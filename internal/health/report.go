package health

import (
	"slices"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/telemetry"
)

// Viewer says whether the caller may see a job by name: the server's
// principal.seesWorkspace. Every name, workspace and tenant of another
// job that reaches an answer goes through refs, the one place that
// redacts.
type Viewer func(tenant, workspace string) bool

// All sees every job (admins, and the leader's own loop).
func All(string, string) bool { return true }

// refs splits jobs into those the caller may see (named) and a count of
// the others, of which nothing else is said.
func (ix *Index) refs(ids []uint64, skip uint64, sees Viewer) (jobs []api.JobRef, tenants []string, others int) {
	jobs = []api.JobRef{}
	tenants = []string{}
	for _, id := range ids {
		if id == skip {
			continue
		}
		p := ix.paths[id]
		if p == nil {
			continue
		}
		if !sees(p.Tenant, p.Workspace) {
			others++
			continue
		}
		jobs = append(jobs, api.JobRef{ID: id, Name: p.Name, Tenant: p.Tenant, Workspace: p.Workspace})
		if !slices.Contains(tenants, p.Tenant) {
			tenants = append(tenants, p.Tenant)
		}
	}
	slices.Sort(tenants)
	return jobs, tenants, others
}

// Verdict is a path judged: the verdict and the message naming its worst
// signal.
type Verdict struct {
	Verdict domain.PathVerdict
	Message string
}

// Judge returns the verdict of job id's path now, without the detail of
// JobHealth (the leader's loop calls it for every job).
func (ix *Index) Judge(id uint64, rd telemetry.Reader, t *Thresholds) (Verdict, bool) {
	p, ok := ix.paths[id]
	if !ok {
		return Verdict{}, false
	}
	v, _ := t.judgePath(p, t.live(rd))
	return v, true
}

// hopJudge judges one hop: live against a reader, or from a Round.
type hopJudge func(h *Hop) hopResult

func (t *Thresholds) live(rd telemetry.Reader) hopJudge {
	return func(h *Hop) hopResult { return t.judgeHop(h, rd) }
}

// judgePath judges every hop and the path (see the package doc).
func (t *Thresholds) judgePath(p *Path, judge hopJudge) (Verdict, []hopResult) {
	hops := make([]hopResult, len(p.Hops))
	var worst *finding
	unknown := ""
	for i := range p.Hops {
		h := &p.Hops[i]
		r := judge(h)
		hops[i] = r
		if len(r.findings) > 0 && (worst == nil || worse(r.findings[0], *worst)) {
			worst = &r.findings[0]
		}
		if r.verdict == domain.PathUnknown && unknown == "" && (r.stale || slices.Contains(t.Require, h.Kind)) {
			unknown = h.Name + ": " + unknownNote(r)
		}
	}
	switch {
	case worst != nil:
		return Verdict{worst.verdict, worst.describe()}, hops
	case unknown != "":
		return Verdict{domain.PathUnknown, unknown}, hops
	case len(p.Hops) == 0:
		return Verdict{domain.PathUnknown, "no hop of the path is in the topology"}, hops
	}
	return Verdict{Verdict: domain.PathHealthy}, hops
}

func unknownNote(r hopResult) string {
	if r.stale {
		return "stale data (its exporter has not answered within its staleness bound)"
	}
	return "no data (no exporter maps a series to it)"
}

func signalValues(fs []finding) []api.SignalValue {
	out := make([]api.SignalValue, 0, len(fs))
	for _, f := range fs {
		out = append(out, api.SignalValue{Entity: entity(f.key), Signal: string(f.signal), Priority: f.priority,
			Value: f.value, Threshold: f.threshold, Verdict: f.verdict})
	}
	return out
}

// JobHealth answers a job's health: its path hop by hop, the verdict, and
// the other jobs on its hot links as the caller may see them. ok is false
// when the job has no path (it holds no GPUs); the caller checks first
// that it may see the job at all.
func (ix *Index) JobHealth(id uint64, rd telemetry.Reader, t *Thresholds, sees Viewer, now time.Time) (api.JobHealth, bool) {
	return ix.jobHealth(id, t, t.live(rd), sees, now)
}

func (ix *Index) jobHealth(id uint64, t *Thresholds, judge hopJudge, sees Viewer, now time.Time) (api.JobHealth, bool) {
	p, ok := ix.paths[id]
	if !ok {
		return api.JobHealth{}, false
	}
	v, hops := t.judgePath(p, judge)
	out := api.JobHealth{Job: id, Verdict: v.Verdict, Message: v.Message, At: now, Hops: make([]api.PathHop, len(p.Hops)), Shared: []api.SharedLink{}}
	for i, h := range p.Hops {
		r := hops[i]
		ph := api.PathHop{Kind: h.Kind, Name: h.Name, Verdict: r.verdict, Signals: signalValues(r.findings)}
		if r.verdict == domain.PathUnknown {
			ph.Note = unknownNote(r)
		}
		out.Hops[i] = ph
		if !r.verdict.Faulty() || (h.Kind != HopPort && h.Kind != HopUplink) {
			continue
		}
		jobs, _, others := ix.refs(ix.byPort[h.port], id, sees)
		if len(jobs) > 0 || others > 0 {
			out.Shared = append(out.Shared, api.SharedLink{Link: h.Name, Verdict: r.verdict, Jobs: jobs, OtherJobs: others})
		}
	}
	return out, true
}

// Hotspots ranks the switch ports and uplinks with a fault, worst first, at
// most limit (0: all), with the jobs on them. A caller that does not see
// every job (sees is not All) gets only ports on the paths of jobs it sees.
func (ix *Index) Hotspots(rd telemetry.Reader, t *Thresholds, sees Viewer, scoped bool, limit int, now time.Time) api.Hotspots {
	return ix.hotspots(t.live(rd), sees, scoped, limit, now)
}

func (ix *Index) hotspots(judgeHop hopJudge, sees Viewer, scoped bool, limit int, now time.Time) api.Hotspots {
	type hot struct {
		i int
		r hopResult
	}
	var hots []hot
	judge := func(i int) {
		r := judgeHop(&ix.topo.ports[i])
		if r.verdict.Faulty() {
			hots = append(hots, hot{i, r})
		}
	}
	if scoped {
		// Only the caller's own paths: the ports of the jobs it sees.
		seen := map[int]bool{}
		for _, id := range ix.Jobs() {
			p := ix.paths[id]
			if !sees(p.Tenant, p.Workspace) {
				continue
			}
			for _, h := range p.Hops {
				if h.Kind != HopPort && h.Kind != HopUplink {
					continue
				}
				if h.port >= 0 && !seen[h.port] {
					seen[h.port] = true
					judge(h.port)
				}
			}
		}
	} else {
		for i := range ix.topo.ports {
			judge(i)
		}
	}
	slices.SortFunc(hots, func(a, b hot) int {
		switch {
		case worse(a.r.findings[0], b.r.findings[0]):
			return -1
		case worse(b.r.findings[0], a.r.findings[0]):
			return 1
		}
		return strings.Compare(ix.topo.ports[a.i].Name, ix.topo.ports[b.i].Name)
	})
	if limit > 0 && len(hots) > limit {
		hots = hots[:limit]
	}
	out := api.Hotspots{At: now, Ports: make([]api.Hotspot, 0, len(hots))}
	for _, h := range hots {
		hop := &ix.topo.ports[h.i]
		jobs, tenants, others := ix.refs(ix.byPort[h.i], 0, sees)
		out.Ports = append(out.Ports, api.Hotspot{Port: hop.Name, Kind: hop.Kind, Verdict: h.r.verdict,
			Signals: signalValues(h.r.findings), Jobs: jobs, Tenants: tenants, OtherJobs: others})
	}
	return out
}
