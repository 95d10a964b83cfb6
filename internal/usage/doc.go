// Package usage is jobfabric's accounting: GPU-hours and
// GPU-equivalent-hours per tenant, workspace, job or submitting token over
// a period, split into guaranteed and borrowed use.
//
// It reads only the runs the replicated state records in each job
// (domain.Run: a holding of GPUs from its placement to its release, with
// the borrowed part decided at placement; internal/state runs.go), so every
// replica, restart and failover gives the same answer, and a job's usage
// agrees with its lifetime to the second. Jobs that retention removed from
// the state count through their usage records (the archive), to the same
// second, so a report does not change when they go. It is pure: the caller hands it
// a read view of the state (state.View satisfies Source) and the time now.
package usage
