// Package kube is the Kubernetes bridge: it makes jobfabric the placement
// authority for pods that ask for it.
//
// Pods carry the scheduling gate jobfabric.io/placement, so no scheduler
// binds them. The bridge groups them into gangs (the jobfabric.io/pod-group
// label, a LeaderWorkerSet group, a JobSet, the controlling batch Job, or
// one pod), reads what each pod asks for (nvidia.com/gpu, the GPU devices
// of its DRA ResourceClaims, MIG or share annotations) and submits each
// complete gang as one jobfabric job in the tenant and workspace its
// namespace is labelled with, idempotently: the job's ExternalID names the
// gang (by its owner's UID where it has one). It waits until the job is
// Ready — GPUs chosen and the tenant's fabric deployed. Only then does each
// pod get required node affinity to its server, its binding (GPU UUIDs,
// NCCL/UCX NICs) as annotations the pod reads through the downward API, its
// GPUs as CDI devices, the job's identity, the gate removed and a binding
// to its node. Nothing runs before the tenant's network is live.
//
// Afterwards the bridge is the job's runtime: pod phases are reported
// (running, succeeded, failed), a job told to stop has its pods evicted
// with the time left to its deadline and is reported stopped once they are
// gone, deleting the pods cancels the job and a job that ends in jobfabric
// deletes its running pods.
//
// The inventory goes the other way: every server of the topology is a Node
// with the topology export's labels; jobfabric's cordon is
// spec.unschedulable and a NoSchedule taint, an unhealthy server or drifted
// facts a Node condition.
//
// It follows kube-apiserver itself (apiserver.go): after an outage it
// watches anew within seconds of the server's return, where client-go's
// informers' backoff could wait a minute.
//
// The bridge keeps no state of its own: the pods' annotations and the
// jobs' ExternalIDs are its memory, so a restarted bridge adopts the jobs
// it submitted before, and cancels those whose pods went while it was down.
package kube
