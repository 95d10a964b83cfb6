// Package sim replays GPU-cluster traces through the real scheduler
// (internal/sched) and measures what comes out: placement quality on the
// openb GPU-sharing traces under the FGD paper's protocol (openb.go), and
// queueing, quotas, borrowing and reclaim on ITP job traces with a
// simulated clock (jobs.go). Reports (report.go) render runs as Markdown
// with SVG plots. It does no I/O of its own beyond the readers and writers
// its callers hand it, and reads no clock for its results: a run is a
// function of its inputs and seed.
package sim
