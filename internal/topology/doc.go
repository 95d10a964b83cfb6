// Package topology owns the topology file: the declared inventory of sites,
// fabrics, switches, GPU servers, NICs and cables.
//
// It parses the file (YAML or JSON) with errors that name the JSON path of the
// offending field, fills defaults and stable link addresses (Normalize),
// checks every rule at once so an operator fixes a file in one round
// (Validate), generates valid rail-optimized clusters (Generate), fingerprints
// a topology so re-applying the same file is a no-op (Fingerprint), and
// answers graph questions other packages ask: which leaf a NIC is cabled to,
// which servers share a stripe or an NVLink domain, how far apart two servers
// are (Index).
//
// The package is pure: no network, no processes, no files (except tests
// reading testdata). The state machine calls Normalize, Validate and
// Fingerprint while applying a log entry, so all three are deterministic.
package topology
