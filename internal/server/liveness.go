package server

import (
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
)

// Runtime liveness: a runtime reports "running" again and again while its
// job runs. Only a change enters the raft log (Ready -> Running, a new
// message, an end); a report that changes nothing is a heartbeat, kept in
// the leader's memory like node agents' (hosts.go) and answered from it.
//
// Failover: the memory is not replicated. A new leader knows no job's last
// report until its runtime reports again (Job.LastReport is unset, never a
// stale time), and a leader that loses leadership forgets what it heard.
// Nothing acts on a job's silence today; a check that does must count a job
// never heard by this leader from the leader's election (as checkHeartbeats
// does for nodes), so every runtime gets a full grace after a failover.

// runtimeWatch is the leader's memory of runtimes' reports, by job id.
type runtimeWatch struct {
	mu   sync.Mutex
	seen map[uint64]time.Time
	// pruneAt is the size at which beat drops ended jobs (amortised: at
	// least twice the entries kept by the last prune).
	pruneAt int
}

// minPrune is the memory size below which ended jobs are not pruned.
const minPrune = 1024

func newRuntimeWatch() *runtimeWatch {
	return &runtimeWatch{seen: map[uint64]time.Time{}, pruneAt: minPrune}
}

// beat records a report on job id; live says whether a job still runs, to
// drop ended ones once the memory has doubled since the last prune.
func (w *runtimeWatch) beat(id uint64, at time.Time, live func(uint64) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen[id] = at
	if len(w.seen) < w.pruneAt {
		return
	}
	for k := range w.seen {
		if !live(k) {
			delete(w.seen, k)
		}
	}
	w.pruneAt = max(minPrune, 2*len(w.seen))
}

func (w *runtimeWatch) last(id uint64) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.seen[id]
	return t, ok
}

// reset forgets everything (leadership lost).
func (w *runtimeWatch) reset() {
	w.mu.Lock()
	clear(w.seen)
	w.pruneAt = minPrune
	w.mu.Unlock()
}

// unchanged: a report that would change nothing in the state, a running
// job reported running again with no message or the same one.
func unchanged(j *domain.Job, req *api.JobReportRequest) bool {
	return req.State == state.ReportRunning &&
		(j.State == domain.JobRunning || j.State == domain.JobPreempting) &&
		(req.Message == "" || req.Message == j.Message)
}

// jobLive: the job holds GPUs and may be reported running.
func (s *Server) jobLive(id uint64) bool {
	j, ok := s.fsm.Job(id)
	return ok && (j.State == domain.JobReady || j.State == domain.JobRunning || j.State == domain.JobPreempting)
}

// withLastReport fills in when this leader last heard the job's runtime.
func (s *Server) withLastReport(j *domain.Job) *domain.Job {
	if t, ok := s.runtimes.last(j.ID); ok {
		j.LastReport = &t
	}
	return j
}
