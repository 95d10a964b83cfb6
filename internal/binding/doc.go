// Package binding is the host binder: for one placed job and one node it
// returns what the host must apply so the job sees exactly its devices —
// the GPUs or MIG instances it holds (CUDA_VISIBLE_DEVICES and
// NVIDIA_VISIBLE_DEVICES by GPU or MIG UUID), the RDMA NICs on the rails
// of those GPUs (NCCL_IB_HCA with exact-match syntax and ports,
// NCCL_SOCKET_IFNAME, NCCL_IB_GID_INDEX for RoCE v2, UCX_NET_DEVICES,
// NCCL_CROSS_NIC=0 on rail-optimized fabrics), CPU and NUMA affinity, the
// device files a container needs, and the job's fabric identity (tenant,
// VRF, group) for the record.
//
// Renderers turn a Binding into shell export lines, Slurm TaskProlog
// lines, a CDI spec (cdiVersion 0.6.0) for container runtimes, or libvirt
// PCI hostdev elements for a VM that takes the GPUs and NICs whole
// (passthrough).
//
// The rule it keeps: a binding never names a GPU, MIG instance or NIC the
// job does not hold. A NIC belongs to the GPU the inventory pairs it with
// (NIC.gpu, the GPU's rail); when the job holds only part of that GPU and
// another tenant holds another part, the NIC is left out, as the fabric
// gives one link to one tenant.
//
// The package is pure: inputs are values from the state, the host facts
// and the inventory; it reads no clock and does no I/O.
package binding
