// Package fabrictest builds the small fabric the fabric, render and (later)
// deploy tests share: 2 spines, 4 leaves (2 stripes of 2 rails), 8 servers
// of 2 GPUs, with tenants in every network model and isolation mode, running
// jobs and pool ids. Why a package: golden files of several packages must
// describe the same cluster, and a fixture copied into each test file would
// drift.
//
// Scale builds the large synthetic clusters of the benchmarks (issue #4's
// 256 leaves, 1,000 tenants, 10,000 running jobs), and StartJob/StopJob
// the changes a job start and stop make, for the fabric tests and for
// internal/bench.
//
// It is pure (no I/O) and meant for tests and benchmarks only.
package fabrictest
