// Package export renders the inventory's network hierarchy in the formats
// other schedulers read, so a Kueue, Volcano or Slurm scheduler packs a
// gang the way jobfabric would: Kueue's Topology object and the node labels
// it keys on, Volcano's HyperNodes, Slurm's topology.conf (topology/tree).
//
// Every format is one walk of the same tree (Build): a fabric (its spines)
// holds leaf groups, a leaf group holds the servers cabled to exactly that
// set of leaves, and, where an NVLink domain spans several servers, an
// NVLink level sits between the leaf group and its servers. On a
// rail-optimized fabric a leaf group is a stripe: the rail leaves every
// server of the stripe reaches in one hop on every rail. A server is under
// several leaves (one per rail), so "the server's leaf" is not a level:
// the rail leaves are informational node labels only.
//
// The package is pure: it reads a domain.Topology and returns bytes.
package export
