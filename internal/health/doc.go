// Package health joins telemetry readings to jobs and tenants: which
// switch ports, uplinks, NICs and GPUs each job's traffic crosses (the
// correlation index), what the signals on them say (verdicts against
// documented thresholds), a job's path health, the fabric's hotspots, and
// what a tenant-scoped caller may see of them (redaction, in one place:
// Viewer and refs). It is pure: the state comes in as a Source
// (state.View), the readings as a telemetry.Reader, the time as an
// argument.
//
// # Path model
//
// A job's path is, for every GPU of its placement: the GPU, the NICs
// serving it (domain.NIC.GPU is its index; without one, the NIC of the
// GPU's rail), the leaf port each NIC is cabled to, and then the uplinks
// its inter-leaf traffic may cross, with the spine port at their other
// end. Which uplinks:
//
//   - A job on one server crosses no uplink (its traffic is NVLink/PCIe),
//     and neither does a job whose endpoints are all on one leaf.
//   - In a rail-optimized fabric (domain.Fabric.RailOptimized) we assume
//     rail-aligned collectives: GPU i talks to GPU i of other servers over
//     rail i, and cross-rail data moves over NVLink first (NCCL's PXN).
//     Such a job crosses the uplinks of the leaves of rail i only when its
//     rail-i endpoints sit on two leaves or more (several stripes). The
//     assumption holds when every server of the job uses the same rails;
//     when they do not (server A has GPU 0, server B GPU 1), traffic must
//     change rails through the spines and the job may cross the uplinks of
//     all its leaves.
//   - In other fabrics a job on two leaves or more may cross every uplink
//     of each of its leaves: ECMP spreads flows over all spines.
//
// The index maps every port and uplink (both ends) back to the jobs and
// tenants whose path holds it. It is immutable; Build makes the next one
// from the state and the previous index, reusing the topology's lookups
// and unchanged jobs' paths.
//
// # Verdicts
//
// Each reading is judged against Thresholds (see its fields for the
// defaults): congested (PFC pauses, PFC watchdog storms, ECN marks,
// CNPs), lossy (drops, discards), link errors (CRC, uncorrectable FEC,
// flaps, link down, optics out of range), GPU errors (XID, NVLink, ECC,
// throttling). A hop's verdict is its worst reading's; stale readings
// count for nothing, and a hop with no fresh reading is unknown. A path's
// verdict is its worst hop's fault, else unknown when a hop of a required
// kind (Thresholds.Require, default switch ports) or any hop whose data
// went stale is unknown, else healthy: stale data never reads healthy.
package health
