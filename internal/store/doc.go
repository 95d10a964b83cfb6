// Package store wires jobfabric's state machine into hashicorp/raft: durable
// log and stable storage (raft-boltdb v2, fsync on every batch), file
// snapshots, a TCP or mutual-TLS transport, and a small API for proposing
// commands and managing membership.
//
// Everything the cluster agrees on goes through Store.Apply. Writes are only
// accepted by the leader; elsewhere Apply returns *NotLeaderError naming the
// leader so that the API layer can redirect. Concurrent Applies are group
// committed: raft batches whatever is queued into one log write, so the cost
// of fsync is shared.
//
// On disk, under Config.DataDir:
//
//	raft/raft.db       log and stable store (bbolt)
//	raft/snapshots/    FSM snapshots, the two newest retained
//
// After a restart the FSM is restored from the newest snapshot at once, but
// log entries after it are applied only when a leader has confirmed the
// commit index. Callers that need the replayed state wait for a leader and,
// on the leader, call Barrier.
package store
