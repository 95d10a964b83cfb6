package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/health"
	"github.com/jobfabric/jobfabric/internal/state"
)

// pathHealth is the leader's correlation of telemetry to jobs: the index
// (rebuilt when the state changed since it was built) and the health
// config.
type pathHealth struct {
	mu      sync.Mutex
	ix      *health.Index
	applied uint64
	cfg     health.Config
	// round is the loop's latest judgment of every path (under mu): the
	// answers come from it while it is of the current index and fresh.
	round *health.Round
}

// freshRound returns the loop's latest round if it is at most two ticks
// old (the loop judges after every ingest and every tick), else nil: the
// caller judges live. The round may be of an earlier index; the callers
// check that it covers what they answer.
func (s *Server) freshRound() *health.Round {
	s.paths.mu.Lock()
	r := s.paths.round
	s.paths.mu.Unlock()
	if r == nil || s.clock.Now().Sub(r.At()) > 2*pathHealthTick {
		return nil
	}
	return r
}

// healthIndex returns the correlation index of the current state. The
// index is immutable: callers use it without the lock.
func (s *Server) healthIndex() *health.Index {
	s.paths.mu.Lock()
	defer s.paths.mu.Unlock()
	// Read the applied index first: an apply in between makes the next
	// call rebuild again, never keeps a stale index.
	if a := s.fsm.AppliedIndex(); s.paths.ix == nil || a != s.paths.applied {
		s.fsm.Read(func(v state.View) { s.paths.ix = health.Build(v, s.paths.ix) })
		s.paths.applied = a
	}
	return s.paths.ix
}

func (s *Server) healthRoutes() []route {
	return []route{
		{method: "GET", path: "/v1/jobs/{id}/health", summary: "A job's path (GPUs -> NICs -> leaf ports -> uplinks) with the worst signals per hop and a verdict, and the other jobs on its hot links (named only when the caller may see them)", access: authed,
			resp: api.JobHealth{}, h: s.jobHealth},
		{method: "GET", path: "/v1/fabric/hotspots", summary: "The worst switch ports and uplinks, ranked, with the jobs and tenants they affect; a tenant-scoped caller sees only ports on its own jobs' paths and only its own jobs' names", access: authed,
			query: []param{{"limit", "integer", "at most this many ports, worst first (1 to 1000; default 50)"},
				{"all", "boolean", "platform callers: also the ports no job's path holds (default: only ports that carry jobs)"}}, resp: api.Hotspots{}, h: s.hotspots},
	}
}

// viewer is what a principal may see of other jobs by name (the same rule
// as GET /v1/jobs/{id}); health redacts everything else.
func viewer(p *principal) health.Viewer {
	if p.platform() {
		return health.All
	}
	return p.seesWorkspace
}

func (s *Server) jobHealth(r *http.Request, p *principal) (any, error) {
	j, err := s.visibleJob(r, p) // another tenant's job: 404, as GET /v1/jobs/{id}
	if err != nil {
		return nil, err
	}
	ix := s.healthIndex()
	var h api.JobHealth
	var ok bool
	if r := s.freshRound(); r != nil && r.Covers(ix, j.ID) {
		h, ok = r.JobHealth(j.ID, viewer(p))
	} else {
		h, ok = ix.JobHealth(j.ID, s.telemetry, &s.paths.cfg.Thresholds, viewer(p), s.clock.Now())
	}
	if !ok {
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "id",
			Message: fmt.Sprintf("job %d is %s: only a job holding GPUs has a path", j.ID, j.State)}
	}
	if j.PathHealth != nil {
		c := *j.PathHealth
		h.Committed = &c
	}
	return h, nil
}

// defaultHotspots is how many ports GET /v1/fabric/hotspots answers
// without a limit.
const defaultHotspots = 50

func (s *Server) hotspots(r *http.Request, p *principal) (any, error) {
	limit, err := queryInt(r, "limit", 1, 1000)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = defaultHotspots
	}
	all := r.URL.Query().Get("all")
	if all != "" && all != "true" && all != "false" {
		return nil, domain.Invalid("all", "all=%q is not true or false", all)
	}
	// Ports on some job's path, as the caller sees jobs; a platform caller
	// asking all=true gets every port, also those no job uses (an unused
	// port the fabric keeps down reads link_down: no job is hurt by it).
	scoped := !p.platform() || all != "true"
	ix := s.healthIndex()
	if r := s.freshRound(); r != nil && r.SameTopology(ix) {
		// The jobs on each port are the round's, at most two ticks old.
		return r.Hotspots(s.telemetry, viewer(p), scoped, int(limit)), nil
	}
	return ix.Hotspots(s.telemetry, &s.paths.cfg.Thresholds, viewer(p), scoped, int(limit), s.clock.Now()), nil
}

// pathHealthTick is how often the leader judges paths without a new
// ingest: a settle deadline passes, a target goes stale.
const pathHealthTick = time.Second

// pathHealthLoop judges every job's path after each telemetry ingest (and
// every pathHealthTick) while this server leads, and commits the verdicts
// the debounce lets through (state.CmdJobsPathHealth): the job then
// carries them, and turning unhealthy or recovering is an event. Without
// telemetry targets or push sources there is nothing to judge: the loop
// does not run, and jobs carry no path health.
func (s *Server) pathHealthLoop(ctx context.Context) {
	if len(s.cfg.Telemetry.Targets) == 0 && len(s.cfg.Telemetry.Push) == 0 {
		return
	}
	t, tick := s.clock.NewTicker(pathHealthTick)
	defer t.Stop()
	var tr *health.Tracker
	var round uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-s.telemetry.Changed():
		}
		if !s.store.IsLeader() {
			tr = nil // a new term starts from the committed verdicts
			s.paths.mu.Lock()
			s.paths.round = nil
			s.paths.mu.Unlock()
			continue
		}
		if tr == nil {
			tr = health.NewTracker(s.paths.cfg.Debounce)
		}
		round++
		s.judgePaths(ctx, tr, round)
	}
}

// judgePaths judges every indexed job and proposes what changed.
func (s *Server) judgePaths(ctx context.Context, tr *health.Tracker, round uint64) {
	ix := s.healthIndex()
	ids := ix.Jobs()
	committed := make(map[uint64]*domain.PathHealth, len(ids))
	s.fsm.Read(func(v state.View) {
		for _, id := range ids {
			if j, ok := v.Job(id); ok && j.PathHealth != nil {
				c := *j.PathHealth
				committed[id] = &c
			}
		}
	})
	now := s.clock.Now()
	r := ix.JudgeAll(s.telemetry, &s.paths.cfg.Thresholds, now)
	s.paths.mu.Lock()
	s.paths.round = r
	s.paths.mu.Unlock()
	var updates []state.JobPathHealth
	for _, id := range ids {
		v, _ := r.Verdict(id)
		if h, ok := tr.Observe(id, committed[id], v, now, round); ok {
			updates = append(updates, state.JobPathHealth{ID: id, Health: h})
		}
	}
	tr.Sweep(round)
	for len(updates) > 0 {
		n := min(len(updates), maxPathHealthBatch)
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := s.propose(actx, state.CmdJobsPathHealth, "system", state.JobsPathHealth{Jobs: updates[:n]}); err != nil {
			s.log.Warn("record path health", "jobs", n, "err", err)
		}
		cancel()
		updates = updates[n:]
	}
}

// maxPathHealthBatch is the most verdicts one command carries (the state
// machine's bound).
const maxPathHealthBatch = 4096
