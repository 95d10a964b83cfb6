// Package slurm bridges slurmctld to jobfabric, so that Slurm starts a job
// exactly where jobfabric placed it: Slurm jobs enter held (sbatch --hold,
// or the job_submit.lua JobSubmitLua writes), the Bridge submits each as a
// jobfabric job known by its external id "slurm:<cluster>:<jobid>", and
// when that job is Ready it sets the Slurm job's required nodes to the
// placed servers and releases it. A job jobfabric cannot take (an account
// without a tenant, no GPU asked) stays held with a "jobfabric: ..."
// comment saying why. A preempted job that runs is sent SIGTERM at the
// start of its grace period, once (as Slurm's own preemption does); at
// its grace deadline the Slurm job is requeued held or cancelled, as its
// workspace's Preemption says; a
// Slurm job allocated off its placement (released by someone else) is
// requeued held. Slurm's view of its nodes (sinfo) reaches jobfabric as a
// runtime's cordon on the servers slurmctld cannot use (down, drained,
// not responding, missing), and a Ready job Slurm will not start where it
// is placed (on such a node, or pending for its nodes past StuckAfter) is
// held and handed back (reported rejected) to be placed elsewhere; a node
// a reservation holds stays cordoned while the reservation lasts. Each
// partition, hidden ones too, is a server pool, and a job a user moves to
// another partition is moved to its pool. A platform runtime token is
// enough.
//
// The bridge speaks to slurmctld only through the Slurm commands (squeue
// with explicit format fields, scontrol, scancel) run by an injected
// Runner: squeue --json is not reliable in Slurm 22.05, and recorded
// command outputs make the parsers testable without a cluster. It keeps no
// state of its own: the external id makes a restart find the jobs it
// already submitted instead of submitting them again.
package slurm
