package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Apply rules: the version of the rules a log entry is applied under.
//
// Every member applies every entry, and must reach the same state. A
// binary whose rules differ from another's (a refusal that became an
// acceptance, a payload field with a new meaning, a new command type)
// would silently diverge from it in a mixed cluster, and would replay an
// old log into a state the cluster never had. So every entry carries the
// rules it was proposed under (Command.Rules), and apply keeps every
// version's branch: an entry is applied as it was when it was proposed,
// whatever binary replays it.
//
// Changing what apply does with an entry (a check, a payload field's
// meaning, a new command type) bumps RulesLatest and keeps the old branch,
// selected by Command.rules(). The leader proposes at the highest version
// every member's binary applies (Member.Rules, FSM.RulesFor), so a new
// rule takes effect once the last member runs a binary with it. A member
// given an entry it cannot apply (a version above its own, a command type
// it does not know) stops (FSM.halt): applying later entries on a state
// that lacks this one would be a divergence nobody sees.
const (
	// RulesGlobalExternalID: a job's externalId is unique among the live
	// jobs of every tenant (the rules before commit 2999ee0). Entries
	// without Rules were all proposed under it.
	RulesGlobalExternalID = 1
	// RulesTenantExternalID: a job's externalId is unique among its own
	// tenant's live jobs; another tenant's job with the id is no conflict
	// (docs/security.md, "Runtimes' ids for jobs"). Also: member.set's
	// audit event names the member's Rules (members.go).
	RulesTenantExternalID = 2
	// RulesBlockedKeepsDevices: a blocked fabric revision removes no device
	// from the state (the switch still runs the deployable revision); its
	// removals take effect with the next revision the devices are given,
	// or its override (fabric.go, removalsBehind). Before, a blocked
	// revision's removals dropped the devices at once.
	RulesBlockedKeepsDevices = 3
	// RulesRuntimeNodes: a runtime cordons the servers it cannot use
	// (node.runtime) and reports a Ready job it cannot start there
	// (report state "rejected": the job is requeued). Before, neither
	// existed: node.runtime was an unknown command type and "rejected" an
	// unknown report state, refused.
	RulesRuntimeNodes = 4
	// RulesPools: server pools (pool.set) and jobs that name one
	// (JobSpec.Pool: placed on the pool's servers only). Before, pool.set
	// was an unknown command type, and a submit naming a pool is refused
	// (a member without pools would place it anywhere).
	RulesPools = 5
	// RulesJobPool: a job that has not started moves to another pool
	// (job.pool: the Slurm bridge, when a user moves a held job to
	// another partition). Before, job.pool was an unknown command type.
	RulesJobPool = 6
	// RulesSubmitKeyOnce: an idempotency key is in SubmitKeyOrder at most
	// once. A key remembered again (its job was removed by retention, and
	// a submit with it made another) leaves its earlier place, so that
	// place's eviction no longer forgets the key while the new job's is in
	// the window (jobs.go, rememberSubmitKey). Before, the key was in the
	// order twice, and the first copy's eviction deleted it: a retry inside
	// the window made a duplicate job.
	RulesSubmitKeyOnce = 7
	// RulesLatest is the highest version this binary applies.
	RulesLatest = RulesSubmitKeyOnce
)

// rules is the version c was proposed under: 1 for entries written before
// versions existed.
func (c *Command) rules() int {
	if c.Rules == 0 {
		return RulesGlobalExternalID
	}
	return c.Rules
}

// Option configures an FSM.
type Option func(*FSM)

// WithMaxRules makes the FSM apply rules up to n only (1 <= n <=
// RulesLatest), as an older binary would: tests of a mixed cluster.
// Values out of range keep RulesLatest.
func WithMaxRules(n int) Option {
	return func(f *FSM) {
		if n >= 1 && n <= RulesLatest {
			f.maxRules = n
		}
	}
}

// WithHalt sets what the FSM calls, once, when it meets an entry it cannot
// apply (an *UnappliableError). A server exits non-zero; tests record it.
// Without it the FSM panics, as hashicorp/nomad's FSM does on an unknown
// message type: it must not go on either way.
func WithHalt(halt func(error)) Option {
	return func(f *FSM) { f.halt = halt }
}

// UnappliableError names a log entry this binary cannot apply.
type UnappliableError struct {
	Index uint64
	Type  CommandType
	// Rules is the entry's version; MaxRules the highest this binary applies.
	Rules, MaxRules int
	// UnknownType: this binary has no handler for Type.
	UnknownType bool
	// Snapshot: a snapshot (of a state whose entries went up to Rules),
	// not an entry: Index and Type are unset.
	Snapshot bool
}

func (e *UnappliableError) Error() string {
	if e.Snapshot {
		return fmt.Sprintf("a raft snapshot holds a state built under apply rules %d and this binary applies rules 1 to %d; "+
			"this member stops rather than restore a state it would read wrong: upgrade this member's binary to one the leader runs, then start it again",
			e.Rules, e.MaxRules)
	}
	why := fmt.Sprintf("it was proposed under apply rules %d and this binary applies rules 1 to %d", e.Rules, e.MaxRules)
	if e.UnknownType {
		why = fmt.Sprintf("this binary does not know command type %q (entry under apply rules %d; this binary applies 1 to %d)", e.Type, e.Rules, e.MaxRules)
	}
	return fmt.Sprintf("raft log entry %d (%s, rules %d) cannot be applied: %s; "+
		"this member stops rather than apply later entries to a state without it: upgrade this member's binary to one the leader runs, then start it again",
		e.Index, e.Type, e.Rules, why)
}

// appliable reports why c cannot be applied by this binary, or nil.
func (f *FSM) appliable(index uint64, c *Command) *UnappliableError {
	_, known := handlers[c.Type]
	if known && c.Rules >= 0 && c.rules() <= f.maxRules {
		return nil
	}
	return &UnappliableError{Index: index, Type: c.Type, Rules: c.rules(), MaxRules: f.maxRules, UnknownType: !known}
}

// MaxRules is the highest apply-rules version this FSM applies.
func (f *FSM) MaxRules() int { return f.maxRules }

// Halted is the entry this FSM stopped at, nil while it applies.
func (f *FSM) Halted() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.halted == nil {
		return nil
	}
	return f.halted
}

// Digest is a hash of the whole replicated state (its JSON: maps encode
// in key order), the same on every member that applied the same entries:
// tests and operators compare members with it, at equal AppliedIndex.
func (f *FSM) Digest() (index uint64, digest string, err error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := json.Marshal(&f.d)
	if err != nil {
		return 0, "", fmt.Errorf("encode state: %w", err)
	}
	sum := sha256.Sum256(b)
	return f.applied, hex.EncodeToString(sum[:]), nil
}

// RulesFor is the version a leader proposes at when members (the servers
// of the raft configuration) apply the log: the highest every one of them
// applies, as recorded by its member.set (none recorded: 1), and this
// binary too.
func (f *FSM) RulesFor(members []string) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v := f.maxRules
	for _, id := range members {
		v = min(v, f.d.Members[id].MaxRules())
	}
	return v
}

// MaxRules is the highest apply-rules version the member's binary applies:
// 1 when it recorded none (a binary older than versions).
func (m Member) MaxRules() int {
	return max(m.Rules, RulesGlobalExternalID)
}

// externalIDConflict is the refusal of spec's externalId when live job j
// already has it, under rules: nil when the rules allow both.
func externalIDConflict(rules int, s *domain.JobSpec, j *domain.Job) *domain.Error {
	if j.State.Terminal() {
		return nil
	}
	if j.Tenant == s.Tenant {
		return &domain.Error{Code: domain.CodeAlreadyExists, Field: "externalId",
			Message: fmt.Sprintf("job %d (%s) already has externalId %s", j.ID, j.State, s.ExternalID)}
	}
	if rules >= RulesTenantExternalID {
		return nil // another tenant's id is its own
	}
	// Version 1: the id is unique across tenants. The refusal names
	// neither the other tenant nor its job (their ids and states are not
	// this tenant's to learn); that the id is taken is all v1 can hide.
	return &domain.Error{Code: domain.CodeAlreadyExists, Field: "externalId",
		Message: fmt.Sprintf("another live job already has externalId %s (until every control-plane member runs a binary with apply rules %d, external ids are unique across tenants)", s.ExternalID, RulesTenantExternalID)}
}
