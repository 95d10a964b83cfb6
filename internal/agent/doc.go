// Package agent is the node agent's loop: it discovers the node's GPUs and
// NICs (hostfacts), sends them to the control plane when they change or
// the server asks, and beats so the server can tell a silent node from a
// healthy one. Everything it touches is injected — the discoverer (with
// its command runner and file system), the reporter (the API client) and
// the clock — so tests and demos run it without GPUs, root or a network.
//
// A failed discovery is reported, not hidden: the node then reports no
// GPUs and the reason, and the server's drift check and host policy decide
// what that means for placements and the jobs on it.
package agent
