package state

import (
	"fmt"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// The member command: the control-plane servers and their addresses.

func (f *FSM) applyMemberSet(c *Command) (any, *domain.Error) {
	p, derr := decode[MemberSet](c)
	if derr != nil {
		return nil, derr
	}
	m := p.Member
	if m.ID == "" || m.RaftAddr == "" {
		return nil, domain.Invalid("id", "member needs an id and a raft address")
	}
	if c.check {
		return nil, nil
	}
	if old, ok := f.d.Members[m.ID]; ok && old == m {
		return &m, nil
	}
	f.d.Members[m.ID] = m
	f.event(c, "member.set", "member/"+m.ID, "", "", fmt.Sprintf("raft=%s api=%s", m.RaftAddr, m.APIAddr))
	return &m, nil
}
