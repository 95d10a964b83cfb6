// Package sched is jobfabric's scheduler: a pure function from a snapshot of
// the state (inventory, tenants, workspaces, jobs) to a plan (which pending
// jobs go where, and why the others wait). It does no I/O and reads no clock;
// the same snapshot gives the same plan. The server's leader runs it and
// commits the plan through Raft, where the state machine re-checks every
// placement with Fit, the same rules against the state it commits to.
// Successive cycles of one caller may keep their sums over the jobs in a
// Carry (carry.go), found by the jobs that changed since; a cycle through
// it gives the same plan as Schedule on the same snapshot.
//
// A cycle runs in numbered phases:
//  1. build the free-GPU view of every server and who holds it (isolation);
//  2. account each workspace's usage against its quota;
//  3. order the pending jobs (within-guarantee before borrowing, then
//     priority, then jobs GPUs are being freed for, then least weighted
//     usage, then age);
//  4. for each job: check quota (no overcommit of anyone's protected
//     guarantee), then find a gang placement packed into the fewest NVLink
//     domains, then stripes, with GPU indices aligned across servers so rails
//     match; place it or record a structured reason. The first job of a
//     workspace that waits for GPUs gets a reservation (when and where it
//     fits as running jobs end); the jobs after it run only where they do
//     not delay it (backfill.go).
package sched
