// Package store wires jobfabric's state machine into hashicorp/raft: durable
// log and stable storage (fsync on every batch), file snapshots, a
// transport, and a small API for proposing commands and managing
// membership.
//
// The log store (logstore.go) is one of two. hashicorp/raft-wal appends a
// batch to a segment file with one fsync and keeps the stable keys (term,
// vote) in a small bbolt file beside it; raft-boltdb v2 keeps both in one
// bbolt file and a batch costs two fsyncs (data pages, then the meta
// page). A new data directory gets Config.LogStore, the WAL by default; a
// data directory runs the store it holds, and naming the other is refused
// rather than started with an empty log. MigrateLogStore (migrate.go)
// moves a stopped server's log and vote across.
//
// Whoever takes part in raft can rewrite the state, so the transport never
// trusts a peer it has not authenticated. A single server runs raft over an
// in-memory transport and listens on nothing. A server that listens (the
// first of a cluster that will grow, one that joins, or any member of a
// multi-server configuration) authenticates peers with TLS: certificates
// under a CA derived from a shared cluster secret (TLS 1.3), or mutual TLS
// against the operator's CA. Listening without either is refused unless
// Config.InsecurePeers says otherwise; raftinject is the attacker that
// tests this. Authentication costs the server its half of a handshake for
// anyone who connects, so Config.Admission (admission.go, on
// internal/srclimit) limits sources that are not members at accept, before
// any TLS byte; the members' addresses, read from the configuration, are
// never limited. The secrets or certificates of a running member are
// rotated with SetClusterSecrets and SetTLS: the next handshakes use the new
// ones, and open connections whose peer is no longer trusted are closed
// (Config.AcceptSecrets and SecretsTLS make a rotation's overlap).
//
// Everything the cluster agrees on goes through Store.Apply. Writes are only
// accepted by the leader; elsewhere Apply returns *NotLeaderError naming the
// leader so that the API layer can redirect. Concurrent Applies are group
// committed: raft batches whatever is queued into one log write, so the cost
// of fsync is shared.
//
// On disk, under Config.DataDir:
//
//	raft/wal/          log (segment files) and stable store (wal-meta.db): LogStoreWAL
//	raft/raft.db       log and stable store in one bbolt file: LogStoreBolt
//	raft/snapshots/    FSM snapshots, the two newest retained
//
// After a restart the FSM is restored from the newest snapshot at once, but
// log entries after it are applied only when a leader has confirmed the
// commit index. Callers that need the replayed state wait for a leader and,
// on the leader, call Barrier. Once a log of SnapshotThreshold entries or
// more past the newest snapshot is applied, the store snapshots: raft's own
// check runs on a timer that each restart starts again.
package store
