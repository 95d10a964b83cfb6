// Package kube is the Kubernetes bridge: it makes jobfabric the placement
// authority for pods that ask for it.
//
// Pods carry the scheduling gate jobfabric.io/placement, so no scheduler
// binds them. The bridge groups them into gangs (the jobfabric.io/pod-group
// label, or one pod), submits each gang as one jobfabric job in the tenant
// and workspace its namespace is labelled with (idempotently: the job's
// ExternalID names the gang), and waits until the job is Ready — GPUs
// chosen and the tenant's fabric deployed. Only then does each pod get
// required node affinity to its server, its binding (GPU UUIDs, NCCL/UCX
// NICs) as annotations the pod reads through the downward API, the job's
// identity, the gate removed and a binding to its node. Nothing runs before
// the tenant's network is live.
//
// The inventory goes the other way: every server of the topology is a Node
// with the topology export's labels, and jobfabric's cordon is
// spec.unschedulable.
//
// The bridge keeps no state of its own: the pods' annotations and the
// jobs' ExternalIDs are its memory, so a restarted bridge adopts the jobs
// it submitted before.
package kube
