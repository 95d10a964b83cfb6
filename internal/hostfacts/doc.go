// Package hostfacts reads what a GPU server is: its GPUs (nvidia-smi -q
// in XML or text, -L for MIG UUIDs, mig -lgi for MIG placements), the PCIe
// and NVLink topology (nvidia-smi topo -m, nvlink --status), its RDMA
// ports (sysfs /sys/class/infiniband, or ibstat), and compares the result
// with the declared inventory (Compare: drift by kind).
//
// GPU<->NIC affinity comes from the PCIe topology only: a NIC belongs to
// the one GPU it shares a PCIe switch or host bridge with (PIX, PXB, PHB),
// never to the GPU its name or index suggests.
//
// The package is pure: parsers take text, the Collector takes an injected
// Runner (commands) and fs.FS (sysfs and procfs rooted at /). The agent
// passes the real ones; FileRunner and os.DirFS of a directory replay
// recorded outputs (--fixture). It does no I/O of its own.
package hostfacts
