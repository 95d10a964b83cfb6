package store

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// NotLeaderError is returned by leader-only operations on any other server.
// LeaderID and LeaderAddr are empty while no leader is known, for example
// during an election; callers retry later rather than redirect then.
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" && e.LeaderAddr == "" {
		return "store: not the leader, and no leader is known"
	}
	return fmt.Sprintf("store: not the leader; leader is %q at %s", e.LeaderID, e.LeaderAddr)
}

// Unwrap lets errors.Is(err, raft.ErrNotLeader) hold too.
func (e *NotLeaderError) Unwrap() error { return raft.ErrNotLeader }

// ErrUnknownOutcome is wrapped into errors that leave it open whether a
// command was committed: leadership was lost after it was appended, the
// store shut down, or the caller's context ended while it was in flight.
// Such a command may still be applied later; retry only idempotent commands.
var ErrUnknownOutcome = errors.New("store: outcome unknown")

// ErrNoListener is wrapped by AddVoter on a server whose raft transport is
// in memory: peers could not reach it. Restart it listening first.
var ErrNoListener = errors.New("store: this server has no raft listener (single server); restart it listening, with peer authentication, before adding members")

// ErrPeerUnreachable is wrapped by AddVoter when the new peer cannot be
// dialled or does not authenticate as a member.
var ErrPeerUnreachable = errors.New("cannot reach and authenticate the new peer")
