package server

import (
	"context"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/state"
)

// tokenUseEvery is the finest last-used resolution kept per token: a
// token's use is committed at most once per this interval, so a busy
// client costs no raft write per request.
const tokenUseEvery = time.Minute

// tokenUses is the leader's memory of when tokens last authenticated a
// request, not yet committed. Every request reaches the leader (followers
// forward before authenticating), so the leader sees every use; what it
// has not committed when it loses leadership is lost (at most a minute).
type tokenUses struct {
	mu      sync.Mutex
	pending map[string]time.Time
}

func (u *tokenUses) record(id string, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending == nil {
		u.pending = map[string]time.Time{}
	}
	if at.After(u.pending[id]) {
		u.pending[id] = at
	}
}

// due takes the uses to commit now: a token never seen used, or last
// committed at least tokenUseEvery before this use. The others stay
// pending (their latest use) until they are due.
func (u *tokenUses) due(committed func(id string) (time.Time, bool)) map[string]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string]time.Time{}
	for id, at := range u.pending {
		last, ok := committed(id)
		if !ok {
			delete(u.pending, id) // revoked
			continue
		}
		if last.IsZero() || at.Sub(last) >= tokenUseEvery {
			out[id] = at
			delete(u.pending, id)
		}
	}
	return out
}

// tokenUseLoop commits due token uses in one command per tick, on the
// leader only.
func (s *Server) tokenUseLoop(ctx context.Context) {
	every := s.cfg.TokenUseFlush
	if every <= 0 {
		every = 10 * time.Second
	}
	s.onLeaderEvery(ctx, every, func() {
		used := s.uses.due(func(id string) (time.Time, bool) {
			tok, ok := s.fsm.Token(id)
			if !ok {
				return time.Time{}, false
			}
			if tok.LastUsedAt == nil {
				return time.Time{}, true
			}
			return *tok.LastUsedAt, true
		})
		if len(used) == 0 {
			return
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := s.propose(actx, state.CmdTokensUsed, "system", state.TokensUsed{Used: used}); err != nil {
			s.log.Warn("record token use", "tokens", len(used), "err", err)
		}
		cancel()
	})
}

// onLeaderEvery calls fn every d while this server leads, until ctx ends:
// the leader's periodic chores (token uses, retention).
func (s *Server) onLeaderEvery(ctx context.Context, d time.Duration, fn func()) {
	t, tick := s.clock.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		if s.store.IsLeader() {
			fn()
		}
	}
}
