// Package state is jobfabric's replicated state machine: typed commands, their
// deterministic application to an in-memory, indexed state, and snapshots.
//
// Apply never reads the clock or a random source: IDs of jobs and events come
// from counters in the state, timestamps and secrets' hashes arrive inside the
// command. Every command carries the version of the apply rules it was
// proposed under and is applied under them, whatever binary replays it; an
// entry this binary cannot apply stops it instead of being skipped
// (rules.go). Every applied command that changes something appends an audit event
// in the same step, so the trail cannot disagree with the state. Reads take a
// read lock and return copies: callers cannot mutate the state behind Raft.
//
// What other packages need built from the state (the scheduler's snapshot,
// the host binder's input) is built outside the state machine from View, a
// read-only view handed out under the read lock (FSM.Read): the package
// keeps what its apply needs. Jobs are indexed (jobindex.go): the live ones
// by ID, the ended ones by end time, so no read sorts every job ever run;
// the read index (readindex.go) lists them by tenant, workspace, state and
// server and keeps each workspace's tally, filed after every command, so
// an API read under the lock costs what it answers, not the state's size.
// Retention (retain.go) removes ended jobs and events past an age or a
// per-tenant count, keeping removed jobs' runs in a usage archive.
package state
