// Package state is jobfabric's replicated state machine: typed commands, their
// deterministic application to an in-memory, indexed state, and snapshots.
//
// Apply never reads the clock or a random source: IDs of jobs and events come
// from counters in the state, timestamps and secrets' hashes arrive inside the
// command. Every applied command that changes something appends an audit event
// in the same step, so the trail cannot disagree with the state. Reads take a
// read lock and return copies: callers cannot mutate the state behind Raft.
package state
