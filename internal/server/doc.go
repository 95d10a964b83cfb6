// Package server is the jobfabric API server: the REST/JSON API under /v1,
// bearer-token authentication and per-tenant authorization, forwarding of
// requests from followers to the Raft leader, cluster join, and the
// bootstrap of the first admin token. It proposes typed commands to the
// replicated store and reads from the state machine; it holds no state of its
// own that is not derived from the log.
package server
