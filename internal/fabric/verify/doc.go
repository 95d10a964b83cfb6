// Package verify proves isolation properties of a compiled fabric intent
// (internal/fabric) against the scheduler's view of the cluster (the
// fabric.Input it was compiled from), and reports every violation it finds.
//
// Why a package of its own: the compiler is the one place that maps
// allocations to ports, VRFs and group rules, so checking its output with
// its own bookkeeping would prove nothing. The verifier reads only the
// intent's devices (ports, VRFs, route targets, VNIs, group policy, ACLs)
// and re-derives who owns which link from the input's topology, tenants and
// allocations with rules written here, then checks:
//
//   - links: every server link is in at most one VRF, a VRF the device has,
//     of the tenant the port names;
//   - tenant-ids: no two tenants share a VRF, VNI, RD, route target or group
//     ID, and no VRF imports a target that is not its tenant's own;
//   - job-endpoints: every running job's links are in its tenant's VRF and,
//     for segmented tenants, classified into the job's group;
//   - bindings: allocations and port bindings agree both ways (the
//     cross-layer check of the scheduler against the fabric);
//   - tenant-isolation: no endpoint of one tenant reaches an endpoint of
//     another, by reachability over the routing graph (see Reachability);
//   - job-isolation: within a segmented tenant, no endpoint reaches an
//     endpoint of another job unless the input's contracts allow it, under
//     group policy and under the ACL fallback alike;
//   - server-ports: every port in no VRF is quarantined, every port guarded,
//     and every port in a VRF accepts only its server's own source
//     addresses (the attacker behind it sends from any source);
//   - underlay-isolation: every server port, assigned or not, taken as an
//     attacker, reaches no underlay address (loopback, VTEP, uplink, BGP
//     peer, listed from the devices themselves) and no switch control
//     plane, and no VTEP would decapsulate a VXLAN packet from it;
//   - switch-traffic: segmented VRFs on group-policy leaves let the
//     leaves' own ICMP errors through (the switch group), and no server or
//     group carries that group;
//   - overlay: every leaf's EVPN routes reach every leaf sharing a tenant
//     with it over sessions both ends configure, re-advertised by spines
//     and super-spines only, never across an AS-path loop, with the
//     originating VTEP kept as next hop (in a three-tier fabric: across
//     pods, through the super-spines).
//
// Reachability is computed from the intent alone: a port belongs to the VRF
// instances (device, VRF) it is bound to; an instance exports its routes
// with its route targets and imports every route carrying a target in its
// import set (locally, or over VXLAN when both ends have an L3VNI); a
// vlan-aware link is also bridged to every link with the same L2VNI whose
// MAC-VRF target its own MAC-VRF imports. Policy is applied on top: group
// policy at the egress VRF (the destination's group against the source's,
// default deny, allow within a group and per contract), ACLs at the ingress
// port. Wherever the model has to guess it over-approximates (it assumes a
// path works), so a verified intent is safe even where the model is coarse.
//
// The package is pure (no I/O) and deterministic: the same input and intent
// give the same report, failures in a fixed order.
package verify
