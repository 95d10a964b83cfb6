package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
)

// Apply-rules versions on the server's side (state/rules.go has the
// rules): the leader proposes at the highest version every member of the
// raft configuration applies, so a rule changed by an upgrade takes effect
// once the last member runs the new binary; each member's version is
// recorded by its member.set: at join (JoinRequest.Rules), by a leader for
// itself (leaderLoop), and by the leader for a follower whose /v1/health
// says its binary applies more than recorded (an upgraded, restarted
// member: learnRules).

// ExitUnappliable is the exit status of a server that met a log entry its
// binary cannot apply (state.UnappliableError): apart from the CLI's
// (docs/operations.md, "CLI exit codes"), so a supervisor can tell it
// from a crash, which a restart of the same binary would not fix either.
const ExitUnappliable = 8

// haltFor is the FSM's halt hook: cfg.Halt, else log and exit. Exiting
// from the apply goroutine, at once, is the point: nothing after the
// entry may be applied, and no snapshot taken (the FSM refuses both
// anyway, should the hook return).
func haltFor(cfg Config, log func(msg string, args ...any)) func(error) {
	if cfg.Halt != nil {
		return cfg.Halt
	}
	return func(err error) {
		log("stopping: this member cannot apply the replicated log", "err", err)
		os.Exit(ExitUnappliable)
	}
}

// proposeRules is the version the leader proposes (and checks) commands
// at now: the highest every other member of the configuration applies
// (state.FSM.RulesFor), and this binary. The leader counts its own binary,
// not its record, which it writes only after it became leader: a single
// server proposes at its newest rules from its first command. Without the
// configuration it assumes the oldest: entries at 1 are applied by every
// binary.
func (s *Server) proposeRules() int {
	ids, err := s.serverIDs()
	if err != nil {
		return state.RulesGlobalExternalID
	}
	return s.fsm.RulesFor(slices.DeleteFunc(ids, func(id string) bool { return id == s.nodeID }))
}

// serverIDs are the servers of the raft configuration, voters or not:
// each applies the log.
func (s *Server) serverIDs() ([]string, error) {
	ms, err := s.store.Members()
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids, nil
}

// learnRules asks each member recorded below this binary's version what
// its binary applies now (its /v1/health) and records a higher answer.
// Only the leader calls it. A member that does not answer keeps its
// record: proposing at a version it may not apply would stop it.
func (s *Server) learnRules(ctx context.Context) {
	ids, err := s.serverIDs()
	if err != nil {
		return
	}
	for _, id := range ids {
		m, ok := s.fsm.Member(id)
		if id == s.nodeID || !ok || m.APIAddr == "" || m.MaxRules() >= s.fsm.MaxRules() {
			continue
		}
		h, err := s.fwd.Load().health(ctx, m.APIAddr)
		if err != nil || h.Node != id || h.ApplyRules <= m.MaxRules() {
			continue
		}
		m.Rules = h.ApplyRules
		if _, err := s.propose(ctx, state.CmdMemberSet, "system", state.MemberSet{Member: m}); err != nil {
			s.log.Warn("record a member's apply rules", "member", id, "rules", h.ApplyRules, "err", err)
			continue
		}
		s.log.Info("member applies later rules", "member", id, "rules", h.ApplyRules, "proposing at", s.proposeRules())
	}
}

// health reads a member's /v1/health (public, answered by the member
// itself).
func (f *forwarder) health(ctx context.Context, apiAddr string) (*api.Health, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(apiAddr, "/")+"/v1/health", nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/v1/health answered %s", apiAddr, resp.Status)
	}
	var h api.Health
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&h); err != nil {
		return nil, fmt.Errorf("%s/v1/health: %w", apiAddr, err)
	}
	return &h, nil
}

// checkJoinRules refuses a member whose binary applies less than the
// version the cluster proposes at: the log it would replay holds entries
// it cannot apply, and it would stop at the first.
func (s *Server) checkJoinRules(id string, rules int) error {
	have, want := max(rules, state.RulesGlobalExternalID), s.proposeRules()
	if have >= want {
		return nil
	}
	return domain.Errorf(domain.CodeFailedPrecondition, "member %s applies rules up to %d, and this cluster proposes at %d (every member applies it): "+
		"its binary is older than the cluster's and would stop at the first entry it cannot apply; run the cluster's binary on it", id, have, want)
}
