package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// rulesAbsent makes the harness write entries without Rules, as every
// binary before versions did.
const rulesAbsent = -1

// halts records what an FSM's halt hook was given.
type halts struct{ errs []error }

func (h *halts) hook(err error) { h.errs = append(h.errs, err) }

// rawEntry is a log entry as another binary may have written it.
func rawEntry(t *testing.T, typ CommandType, rules int, payload any) []byte {
	t.Helper()
	p, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(Command{Type: typ, At: t0, Actor: "admin:test", Payload: p, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUnappliableEntryStopsTheMember: an entry of a command type this
// binary does not know, or under rules above its own, stops the member
// through its halt hook, naming the entry; nothing after it is applied,
// and no snapshot or restore is taken. (Before versions, an unknown type
// was refused, counted, and the next entries applied on a state the
// leader's was not.)
func TestUnappliableEntryStopsTheMember(t *testing.T) {
	submit := JobSubmit{Spec: domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 1}}
	tests := map[string]struct {
		max   int // WithMaxRules (0: RulesLatest)
		entry func(t *testing.T) []byte
		want  UnappliableError
	}{
		"unknown command type": {
			entry: func(t *testing.T) []byte { return rawEntry(t, "job.frobnicate", 0, map[string]int{"id": 1}) },
			want:  UnappliableError{Type: "job.frobnicate", Rules: 1, MaxRules: RulesLatest, UnknownType: true},
		},
		"unknown command type under later rules": {
			entry: func(t *testing.T) []byte {
				return rawEntry(t, "job.frobnicate", RulesLatest+1, map[string]int{"id": 1})
			},
			want: UnappliableError{Type: "job.frobnicate", Rules: RulesLatest + 1, MaxRules: RulesLatest, UnknownType: true},
		},
		"rules above this binary's": {
			entry: func(t *testing.T) []byte { return rawEntry(t, CmdJobSubmit, RulesLatest+1, submit) },
			want:  UnappliableError{Type: CmdJobSubmit, Rules: RulesLatest + 1, MaxRules: RulesLatest},
		},
		"rules above an older binary's": {
			max:   RulesGlobalExternalID,
			entry: func(t *testing.T) []byte { return rawEntry(t, CmdJobSubmit, RulesTenantExternalID, submit) },
			want:  UnappliableError{Type: CmdJobSubmit, Rules: RulesTenantExternalID, MaxRules: RulesGlobalExternalID},
		},
		"negative rules": {
			entry: func(t *testing.T) []byte { return rawEntry(t, CmdJobSubmit, -3, submit) },
			want:  UnappliableError{Type: CmdJobSubmit, Rules: -3, MaxRules: RulesLatest},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stopped halts
			h := newHarness(t)
			h.f = New(WithMaxRules(tc.max), WithHalt(stopped.hook))
			h.rules = RulesGlobalExternalID // what every binary applies
			h.cluster(1, 1, 8)
			h.must(CmdJobSubmit, submit)
			before := h.snapshot()
			index, digest, _ := h.f.Digest()

			bad := tc.entry(t)
			if derr := h.f.Check(bad); derr == nil {
				t.Fatal("Check let through an entry this binary cannot apply")
			}
			r := h.f.Apply(&raft.Log{Index: index + 1, Type: raft.LogCommand, Data: bad}).(*Result)
			if r.Err == nil {
				t.Fatalf("the entry was applied: %+v", r.Value)
			}
			if len(stopped.errs) != 1 {
				t.Fatalf("halt called %d times, want once", len(stopped.errs))
			}
			var u *UnappliableError
			if !errors.As(stopped.errs[0], &u) {
				t.Fatalf("halt given %T %v", stopped.errs[0], stopped.errs[0])
			}
			want := tc.want
			want.Index = index + 1
			if *u != want {
				t.Fatalf("halt given %+v, want %+v", *u, want)
			}
			for _, s := range []string{"entry " + strconv.FormatUint(index+1, 10), string(want.Type), "upgrade this member's binary"} {
				if !strings.Contains(u.Error(), s) {
					t.Errorf("the stop %q does not say %q", u, s)
				}
			}
			if !errors.Is(h.f.Halted(), stopped.errs[0]) && h.f.Halted().Error() != u.Error() {
				t.Fatalf("Halted() = %v", h.f.Halted())
			}

			// A later entry, one this binary knows, is not applied either.
			next, err := Encode(CmdJobSubmit, t0.Add(time.Hour), "admin:test", submit)
			if err != nil {
				t.Fatal(err)
			}
			if r := h.f.Apply(&raft.Log{Index: index + 2, Type: raft.LogCommand, Data: next}).(*Result); r.Err == nil {
				t.Fatal("a stopped member applied the next entry")
			}
			if got, gotDigest, _ := h.f.Digest(); got != index || gotDigest != digest {
				t.Fatalf("a stopped member's state moved: index %d -> %d", index, got)
			}
			if len(stopped.errs) != 1 {
				t.Fatalf("halt called %d times, want once", len(stopped.errs))
			}
			if n := h.f.Refused(); n != 0 {
				t.Fatalf("%d entries counted as refused: a stop is not a refusal", n)
			}
			// No snapshot is labelled past the entry, and none replaces the
			// state under it.
			if _, err := h.f.Snapshot(); err == nil {
				t.Fatal("a stopped member took a snapshot")
			}
			if err := h.f.Restore(nopCloser{bytes.NewReader(before)}); err == nil {
				t.Fatal("a stopped member restored a snapshot")
			}
		})
	}
}

// TestUnappliableEntryPanicsWithoutHook: no hook, no going on.
func TestUnappliableEntryPanicsWithoutHook(t *testing.T) {
	f := New()
	defer func() {
		if _, ok := recover().(*UnappliableError); !ok {
			t.Fatal("an unknown command type did not stop an FSM without a halt hook")
		}
	}()
	f.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: rawEntry(t, "job.frobnicate", 0, nil)})
}

// TestExternalIDRulesByVersion: a log with entries proposed under rules 1
// and 2 replays each under its own: another tenant's live job with the
// same externalId refuses a submit at 1 (without naming that job) and not
// at 2, and another FSM replaying the log reaches the same state. Check
// answers as Apply at each version (the harness compares them).
func TestExternalIDRulesByVersion(t *testing.T) {
	h := newHarness(t)
	h.rules = rulesAbsent // a log written before versions
	h.cluster(1, 2, 8)
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("globex").Obj()})
	h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("globex", "lab").Guaranteed(8).Borrow(8).Obj()})
	acme := MakeJob("research", 1).ExternalID("slurm:4242").Obj()
	h.must(CmdJobSubmit, acme) // job 1
	globex := acme
	globex.Spec.Tenant, globex.Spec.Workspace = "globex", "lab"

	for _, rules := range []int{rulesAbsent, RulesGlobalExternalID} {
		h.rules = rules
		r := h.refusedChangesNothing(CmdJobSubmit, globex)
		if r.Err == nil || r.Err.Code != domain.CodeAlreadyExists || r.Err.Field != "externalId" {
			t.Fatalf("rules %d: globex's submit with acme's live id: %v, want already_exists on externalId", rules, r.Err)
		}
		// The refusal is globex's to read: nothing of acme's job.
		for _, leak := range []string{"job 1", "acme", "Pending", "research"} {
			if strings.Contains(r.Err.Message, leak) {
				t.Fatalf("rules %d: the refusal names another tenant's job (%q): %s", rules, leak, r.Err.Message)
			}
		}
	}
	// Under 1, a tenant's own duplicate names its own job, as before.
	if r := h.refusedChangesNothing(CmdJobSubmit, acme); r.Err == nil || !strings.Contains(r.Err.Message, "job 1 ") {
		t.Fatalf("acme's own duplicate at rules 1: %v", r.Err)
	}

	h.rules = RulesTenantExternalID
	g := h.must(CmdJobSubmit, globex).(*domain.Job)
	if g.Tenant != "globex" || g.ExternalID != "slurm:4242" {
		t.Fatalf("globex's job at rules 2: %+v", g)
	}
	if r := h.refusedChangesNothing(CmdJobSubmit, acme); r.Err == nil || !strings.Contains(r.Err.Message, "job 1 ") {
		t.Fatalf("acme's own duplicate at rules 2: %v", r.Err)
	}
	// Back to 1 (a member that advertises 1 joined): the rule is 1's again.
	h.rules = RulesGlobalExternalID
	other := globex
	other.Spec.ExternalID = "slurm:4243"
	h.must(CmdJobSubmit, other)
	acme2 := acme
	acme2.Spec.ExternalID = "slurm:4243"
	if r := h.refusedChangesNothing(CmdJobSubmit, acme2); r.Err == nil || strings.Contains(r.Err.Message, "job 3") || strings.Contains(r.Err.Message, "globex") {
		t.Fatalf("acme's submit with globex's live id at rules 1: %v", r.Err)
	}

	// Replay: every entry under its own rules, the same state.
	_, want, err := h.f.Digest()
	if err != nil {
		t.Fatal(err)
	}
	replica := New()
	for i, b := range h.log {
		replica.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: b})
	}
	if _, got, _ := replica.Digest(); got != want {
		t.Fatal("replaying a log of rules 1 and 2 entries reached another state")
	}
	if n, m := replica.Refused(CmdJobSubmit), h.f.Refused(CmdJobSubmit); n != m || n != 5 {
		t.Fatalf("replay refused %d submits, the original %d; want 5", n, m)
	}
}

// TestRulesFor: the leader proposes at the highest version every member
// of the configuration applies; one with none recorded applies 1, and no
// version is above the leader's own.
func TestRulesFor(t *testing.T) {
	h := newHarness(t)
	h.rules = RulesGlobalExternalID
	h.must(CmdMemberSet, MemberSet{Member: Member{ID: "a", RaftAddr: "a:1", Rules: 2}})
	h.must(CmdMemberSet, MemberSet{Member: Member{ID: "b", RaftAddr: "b:1", Rules: 7}})
	h.must(CmdMemberSet, MemberSet{Member: Member{ID: "old", RaftAddr: "o:1"}})
	older := New(WithMaxRules(1))
	for i, b := range h.log {
		older.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: b})
	}
	tests := []struct {
		f       *FSM
		members []string
		want    int
	}{
		{h.f, nil, RulesLatest},
		{h.f, []string{"a"}, 2},
		{h.f, []string{"a", "b"}, 2}, // b's later binary: never above ours
		{h.f, []string{"a", "b", "old"}, 1},
		{h.f, []string{"a", "unrecorded"}, 1},
		{older, []string{"a", "b"}, 1},
	}
	for _, tc := range tests {
		if got := tc.f.RulesFor(tc.members); got != tc.want {
			t.Errorf("RulesFor(%v) on max %d = %d, want %d", tc.members, tc.f.MaxRules(), got, tc.want)
		}
	}
	if r := h.refusedChangesNothing(CmdMemberSet, MemberSet{Member: Member{ID: "a", RaftAddr: "a:1", Rules: -1}}); r.Err == nil || r.Err.Field != "rules" {
		t.Fatalf("negative rules: %v", r.Err)
	}
}

// TestMemberSetAuditByRules: under rules 1 a member.set writes the events
// binaries before versions write (they drop Rules): none for a change of
// Rules alone, no rules in the message. Under 2 the change is recorded.
func TestMemberSetAuditByRules(t *testing.T) {
	h := newHarness(t)
	h.rules = RulesGlobalExternalID
	h.must(CmdMemberSet, MemberSet{Member: Member{ID: "a", RaftAddr: "a:1", APIAddr: "http://a"}})
	h.must(CmdMemberSet, MemberSet{Member: Member{ID: "a", RaftAddr: "a:1", APIAddr: "http://a", Rules: 2}})
	evs := h.f.Events(EventFilter{})
	if len(evs) != 1 || evs[0].Message != "raft=a:1 api=http://a" {
		t.Fatalf("events at rules 1: %+v", evs)
	}
	if m, _ := h.f.Member("a"); m.Rules != 2 {
		t.Fatalf("member a recorded rules %d, want 2", m.Rules)
	}
	h.rules = RulesTenantExternalID
	h.must(CmdMemberSet, MemberSet{Member: Member{ID: "a", RaftAddr: "a:1", APIAddr: "http://a", Rules: 3}})
	evs = h.f.Events(EventFilter{})
	if len(evs) != 2 || evs[1].Message != "raft=a:1 api=http://a rules=3" {
		t.Fatalf("events at rules 2: %+v", evs)
	}
}

// TestSnapshotOfLaterRulesStopsTheMember: a snapshot carries the highest
// apply rules of the entries in its state. A binary that applies fewer
// (a downgraded member given the leader's snapshot, or restarting on its
// own) stops at Restore, as it stops at such an entry, instead of reading
// the state without what it does not know; a state of rules it applies
// restores as before.
func TestSnapshotOfLaterRulesStopsTheMember(t *testing.T) {
	submit := JobSubmit{Spec: domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 1}}
	build := func(rules int) []byte {
		h := newHarness(t)
		h.rules = rules
		h.cluster(1, 1, 8)
		h.must(CmdJobSubmit, submit)
		return h.snapshot()
	}
	older := RulesLatest - 1

	// Entries up to the older binary's rules: it restores them.
	var stopped halts
	f := New(WithMaxRules(older), WithHalt(stopped.hook))
	if err := f.Restore(nopCloser{bytes.NewReader(build(older))}); err != nil || len(stopped.errs) != 0 {
		t.Fatalf("a snapshot of rules %d on a binary of rules %d: %v, halts %v", older, older, err, stopped.errs)
	}
	if _, err := f.Snapshot(); err != nil {
		t.Fatalf("snapshot after a good restore: %v", err)
	}

	// Entries of the latest rules: the older binary stops.
	latest := build(RulesLatest)
	stopped = halts{}
	f = New(WithMaxRules(older), WithHalt(stopped.hook))
	_, before, _ := f.Digest()
	err := f.Restore(nopCloser{bytes.NewReader(latest)})
	if err == nil || len(stopped.errs) != 1 {
		t.Fatalf("a snapshot of rules %d restored on a binary of rules %d: %v, halts %v", RulesLatest, older, err, stopped.errs)
	}
	var u *UnappliableError
	if !errors.As(stopped.errs[0], &u) || *u != (UnappliableError{Snapshot: true, Rules: RulesLatest, MaxRules: older}) {
		t.Fatalf("halt given %#v", stopped.errs[0])
	}
	for _, s := range []string{"snapshot", fmt.Sprintf("apply rules %d", RulesLatest), "upgrade this member's binary"} {
		if !strings.Contains(u.Error(), s) {
			t.Errorf("the stop %q does not say %q", u, s)
		}
	}
	if _, after, _ := f.Digest(); after != before || f.Halted() == nil {
		t.Fatalf("the stopped member's state changed (%v), or it is not halted (%v)", after != before, f.Halted())
	}
	if _, err := f.Snapshot(); err == nil {
		t.Fatal("a stopped member took a snapshot")
	}
	// The latest binary restores it, and keeps the version in its own.
	f = New()
	if err := f.Restore(nopCloser{bytes.NewReader(latest)}); err != nil {
		t.Fatal(err)
	}
	if f.d.Rules != RulesLatest {
		t.Fatalf("restored state's rules %d, want %d", f.d.Rules, RulesLatest)
	}
}
