// Package pool owns the fabric's number pools: VNIs, VLANs, VRF ids (the
// assigned number of route distinguishers), route-target values and 16-bit
// group-policy IDs.
//
// Why a package of its own: an id given to a tenant or a job ends up in
// device configurations, and devices forget slowly. A VNI that is handed to a
// new tenant while a leaf still carries it for the old one joins two tenants'
// routes; a group ID reused while a stale rule still names it lets a new job
// into an old job's group. So an id is never reused while any deployed
// revision still carries it, and a released id sits in quarantine for a
// configurable time before it can be handed out again.
//
// The State is plain data (JSON) kept in the replicated state machine.
// Every change takes the caller's time (the command's time): the package
// never reads the clock, so applying the same log gives the same pools on
// every server. Allocation is next-fit (the cursor moves on after each id), so
// freed ids are reused as late as possible even after their quarantine.
//
// The package is pure: standard library and internal/domain only.
package pool
