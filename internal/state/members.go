package state

import (
	"fmt"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// The member command: the control-plane servers, their addresses and the
// apply rules their binaries apply.

func (f *FSM) applyMemberSet(c *Command) (any, *domain.Error) {
	p, derr := decode[MemberSet](c)
	if derr != nil {
		return nil, derr
	}
	m := p.Member
	if m.ID == "" || m.RaftAddr == "" {
		return nil, domain.Invalid("id", "member needs an id and a raft address")
	}
	if m.Rules < 0 {
		return nil, domain.Invalid("rules", "member %s: rules %d is not a version (1 or more; 0: not recorded)", m.ID, m.Rules)
	}
	if c.check {
		return nil, nil
	}
	old, ok := f.d.Members[m.ID]
	if ok && old == m {
		return &m, nil
	}
	f.d.Members[m.ID] = m
	msg := fmt.Sprintf("raft=%s api=%s", m.RaftAddr, m.APIAddr)
	if c.rules() < RulesTenantExternalID {
		// Under version 1 the audit trail is what binaries older than
		// versions write, which drop Rules: no event for a change of
		// Rules alone, and none of it in the message. (They cannot store
		// Rules at all; only RulesFor reads it, on a leader of a later
		// binary.)
		if ok && old.RaftAddr == m.RaftAddr && old.APIAddr == m.APIAddr {
			return &m, nil
		}
	} else {
		msg += fmt.Sprintf(" rules=%d", m.MaxRules())
	}
	f.event(c, "member.set", "member/"+m.ID, "", "", msg)
	return &m, nil
}
