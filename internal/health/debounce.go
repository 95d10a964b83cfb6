package health

import (
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Debounce decides when a judged verdict becomes the job's committed path
// health. Getting worse is fast (detection latency is the point); getting
// better is slow, so a flapping link is reported once, not every time it
// comes and goes.
type Debounce struct {
	// Raise: a verdict worse than the committed one is committed once it
	// has held this long (default 0: at the first judgment that sees it).
	Raise time.Duration `json:"raise"`
	// Settle: a verdict no worse than the committed one (a recovery, a
	// lesser fault) or unknown is committed once it has held this long
	// (default 30s). A link that flaps faster than this stays unhealthy.
	Settle time.Duration `json:"settle"`
}

// DefaultDebounce returns the documented defaults.
func DefaultDebounce() Debounce { return Debounce{Raise: 0, Settle: 30 * time.Second} }

// Tracker remembers, per job, the verdict waiting to be committed and
// since when it holds. The leader's loop owns one; a new leader starts
// afresh from the committed verdicts in the state.
type Tracker struct {
	d    Debounce
	jobs map[uint64]candidate
}

type candidate struct {
	v     Verdict
	since time.Time
	seen  uint64 // the round that last saw the job
}

// NewTracker returns an empty tracker.
func NewTracker(d Debounce) *Tracker { return &Tracker{d: d, jobs: map[uint64]candidate{}} }

// Observe takes a job's verdict judged at now and its committed health
// (nil when none), and returns the health to commit, if any. round
// identifies the pass over all jobs (see Sweep).
func (t *Tracker) Observe(id uint64, committed *domain.PathHealth, v Verdict, now time.Time, round uint64) (domain.PathHealth, bool) {
	c, ok := t.jobs[id]
	if !ok || c.v.Verdict != v.Verdict {
		c = candidate{v: v, since: now}
	}
	c.seen = round
	t.jobs[id] = c
	if committed != nil && committed.Verdict == v.Verdict {
		return domain.PathHealth{}, false
	}
	hold := t.d.Settle
	switch {
	case committed == nil && v.Verdict == domain.PathHealthy:
		hold = 0 // a first healthy verdict is no news: record it at once
	case v.Verdict.Faulty() && (committed == nil || v.Verdict.Severity() > committed.Verdict.Severity()):
		hold = t.d.Raise
	}
	if now.Sub(c.since) < hold {
		return domain.PathHealth{}, false
	}
	return domain.PathHealth{Verdict: v.Verdict, Since: c.since, Message: v.Message}, true
}

// Sweep forgets jobs the last round did not see (they ended).
func (t *Tracker) Sweep(round uint64) {
	for id, c := range t.jobs {
		if c.seen != round {
			delete(t.jobs, id)
		}
	}
}
